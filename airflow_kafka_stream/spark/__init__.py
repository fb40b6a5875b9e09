"""Deprecated: the old home of the source and the runtime, kept so jobs written against it still run.

The source that ships to executors is now :mod:`airflow_kafka_stream.source`, the driver runtime
:mod:`airflow_kafka_stream.runtime`. ``spark.runtime``, ``spark.source`` and ``spark.dead_letter``
re-export their public names and warn (DeprecationWarning) with the new module to import.
"""
