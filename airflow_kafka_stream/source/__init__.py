"""The ``kafka_stream`` Spark data source: Spark's Kafka source as a Python data source.

Everything here may run on executors (the readers, the C extension ``_kafka_arrow``, the consumer
cache) or is the source's own planning on the driver (options, offset ranges, the driver reader,
offsets text). It depends on nothing of the driver runtime (:mod:`airflow_kafka_stream.runtime`)
or the control plane, so an executor imports only what it reads with. Register it with
:func:`airflow_kafka_stream.source.source.register`.
"""
