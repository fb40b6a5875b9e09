"""The job home's storage credentials, from a connection of their own.

A job home that is not local (``s3://``, ``gs://``, any fsspec URL) takes its storage options from a
connection whose extra holds fsspec storage options; its login and password, when set, fill ``key`` and
``secret`` as s3fs names them. None: a local job home, or credentials from the environment.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_kafka_stream.errors import StreamError

# Lazy imports: storage.jobhome (about 30 ms) waits for a job home to open: every operator imports this hook while
# Airflow parses its DAG file.


class JobHomeStorageHook(BaseHook):
    """fsspec storage options of a job home, and the job home itself.

    :param job_home: the job's home directory (a path or an fsspec URL).
    :param storage_conn_id: a connection whose extra holds fsspec storage options, or None.
    """

    conn_name_attr = "storage_conn_id"
    default_conn_name = None
    hook_name = "Streaming job home (fsspec storage options)"

    def __init__(self, job_home: str, storage_conn_id: str | None = None) -> None:
        super().__init__()
        self.job_home = job_home
        self.storage_conn_id = storage_conn_id

    def storage_options(self) -> dict[str, Any]:
        """fsspec storage options for the job home (secrets included: never log them; empty for none)."""
        if not self.storage_conn_id:
            return {}
        conn = self.get_connection(self.storage_conn_id)
        options = dict(conn.extra_dejson or {})
        if conn.login and "key" not in options:
            options["key"] = conn.login
        if conn.password and "secret" not in options:
            options["secret"] = conn.password
        return options

    def home(self, require: bool = True):
        """The job home (``storage.jobhome.JobHome``), refused when the directory is not one; with
        ``require=False`` as it is (a first submit makes it, a driver just launched has not written yet)."""
        from airflow_kafka_stream.storage.jobhome import JobHome

        home = JobHome(self.job_home, self.storage_options())
        if require:
            home.require()
        return home

    def test_connection(self) -> tuple[bool, str]:
        try:
            self.home()
        except StreamError as exc:
            return False, str(exc)
        return True, f"job home {self.job_home} is readable"
