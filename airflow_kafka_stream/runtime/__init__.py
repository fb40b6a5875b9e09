"""The driver runtime: what a PySpark job runs its query under to be operated by this project.

It runs only in the driver: the start protocol under the job lock, the status and its heartbeat,
group commits, the drain on a stop request, fencing, a warm standby's takeover, dead letters.
What ships to executors is the ``kafka_stream`` source (:mod:`airflow_kafka_stream.source`), which
this package configures but which never imports it. A job imports its facade from here::

    from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime
"""

from airflow_kafka_stream.runtime.config import EXIT_FAILED, EXIT_OK, RunResult, StreamConfig
from airflow_kafka_stream.runtime.stream_runtime import StreamRuntime, run_stream
from airflow_kafka_stream.storage.files import client_config_from_env

__all__ = ["EXIT_FAILED", "EXIT_OK", "RunResult", "StreamConfig", "StreamRuntime", "client_config_from_env",
           "run_stream"]
