"""Deprecated: the old home of the source and the runtime, kept so jobs written against it still run.

The source that ships to executors is now :mod:`airflow_kafka_stream.source`, the driver runtime
:mod:`airflow_kafka_stream.runtime`. Every module of the old package (``spark.runtime``, ``spark.session``,
``spark.source``, ``spark.dead_letter``, ...) re-exports its public names from where they live now and warns
(DeprecationWarning) with the module to import instead; the table is in ``_alias``.
"""
