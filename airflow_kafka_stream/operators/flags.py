"""Deprecated path: ``as_flag`` is ``airflow_kafka_stream.core.values.flag``, the one parser of switches."""

from airflow_kafka_stream.moved import moved_module

moved_module(__name__, {"as_flag": "airflow_kafka_stream.core.values:flag"}, globals())
