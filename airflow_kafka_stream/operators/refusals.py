"""Deprecated path: refusals in a task's words moved to ``airflow_kafka_stream.tasks.refusals``."""

from airflow_kafka_stream.moved import moved_module

moved_module(__name__, {name: f"airflow_kafka_stream.tasks.refusals:{name}" for name in (
    "PARAMETER_OF_SETTING", "parameters_of", "parameter_for", "parameter_text", "in_parameters",
    "refusals_name_parameters")}, globals())
