"""Deprecated path: the lag objective's check moved to ``airflow_kafka_stream.tasks.objective_check``."""

from airflow_kafka_stream.moved import moved_module

moved_module(__name__, {name: f"airflow_kafka_stream.tasks.objective_check:{name}" for name in (
    "UNSET", "refuse_bad_objective", "check_objective")}, globals())
