"""Start the full Airflow stack on loopback: two api-servers, scheduler, dag-processor and triggerer on SQLite.

What ``airflow standalone`` brings up, started component by component so that
the caller chooses the port, knows where each component's log is, and can
stop all of them for certain (each runs in its own process group). Everything
it starts listens on loopback only: the api-servers, no log server, and the
Spark drivers its tasks launch (``SPARK_LOCAL_IP``). Used by
``scripts/demo --stack`` and by the tests that go through the REST API and the
UI. Sized for a two-core machine: one worker per api-server, a LocalExecutor
with low parallelism, one parsing process.

The REST API and UI (``--apps core``) and the execution API the task runners
call (``--apps execution``) are separate processes, as a deployment may run
them. On SQLite one process serving both hangs: Airflow 3.3's audit-log
dependency commits on the event loop, so while a task runner's request holds
the write lock (its commit runs after the handler, scheduled by that same loop)
a user's POST blocks the whole server until SQLite's lock wait runs out, and
then answers HTTP 500. Apart, the lock holder's loop is free to commit.

Login: the SimpleAuthManager with an ``admin`` user and a read-only ``viewer`` (to see what the job page
offers a user who may trigger nothing), whose passwords are written to ``<home>/passwords.json`` (mode 0600)
before the stack starts; they are never printed. The DAGs start paused, as in any new deployment: :meth:`AirflowStack.unpause`
before a run is triggered, so scheduled example DAGs do not start by themselves.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow_kafka_stream.devstack import LOOPBACK_ENV
from airflow_kafka_stream.devstack.broker import free_port
from airflow_kafka_stream.errors import StreamError

COMPONENTS = ("api-server", "execution-api", "scheduler", "dag-processor", "triggerer")
#: Each component's command. The scheduler (LocalExecutor) and the triggerer would each start a log server on
#: every interface (Airflow 3.3 has no setting for its address); every component here shares one AIRFLOW_HOME,
#: so the api-server reads task and trigger logs from their files and no log server is needed. The execution
#: API's port is added when the stack starts.
COMMANDS = {"api-server": ["api-server", "--apps", "core"], "execution-api": ["api-server", "--apps", "execution"],
            "scheduler": ["scheduler", "--skip-serve-logs"], "dag-processor": ["dag-processor"],
            "triggerer": ["triggerer", "--skip-serve-logs"]}
USER = "admin"
#: A read-only login: it may read DAGs and the job page, and trigger nothing.
VIEWER = "viewer"
#: The user the stack's drivers announce their output assets as (role op: it may create asset events); the
#: stack's ``airflow_api`` connection logs in as it (docs/assets.md).
ANNOUNCER = "announcer"
#: SQLite lets one connection write at a time and Python's driver waits 5 s for the lock by default. With four
#: components writing on a loaded two-core machine that ran out: CI saw the api-server answer a trigger with
#: HTTP 500 "Database error". The stack waits longer, and its database runs in WAL mode (set once, after the
#: migration) so that readers no longer block the writer.
SQLITE_CONNECT_ARGS: dict[str, Any] = {"timeout": 60}
AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"


class StackError(StreamError):
    """The Airflow stack did not come up, or a request to it failed."""


@dataclass
class AirflowStack:
    """A running Airflow stack; use as a context manager or call stop()."""

    home: Path
    port: int
    execution_port: int
    env: dict[str, str] = field(repr=False)
    processes: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)
    #: When every component had answered its health check (UTC): requests made before are the start-up's own.
    ready_at: datetime | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def execution_url(self) -> str:
        """Where task runners reach the execution API."""
        return f"http://127.0.0.1:{self.execution_port}/execution/"

    @property
    def password_file(self) -> Path:
        return self.home / "passwords.json"

    @property
    def user(self) -> str:
        return USER

    def password(self, user: str = USER) -> str:
        return json.loads(self.password_file.read_text())[user]

    def log_path(self, component: str) -> Path:
        return self.home / "logs" / f"{component}.log"

    def log_tail(self, component: str, chars: int = 3000) -> str:
        try:
            return self.log_path(component).read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def troubled_requests(self, slower_than_seconds: float = 30.0) -> list[str]:
        """Access-log lines of both api-servers for requests answered with 5xx or slower than the limit: what a
        user of the UI or a task runner would have met as an error or a hang. Requests made before the stack was
        ready are left out: they are the start-up's health checks, which the wait for the stack bounds (an
        api-server's first request builds its routes, seconds on a loaded machine)."""
        troubled = []
        for component in ("api-server", "execution-api"):
            for line in self.log_tail(component, chars=10**9).splitlines():
                if "request finished" not in line:
                    continue
                fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
                took_us = int(fields.get("duration_us", "0"))
                finished = _finished_at(line)
                if self.ready_at and finished and finished - timedelta(microseconds=took_us) < self.ready_at:
                    continue
                if fields.get("status_code", "").startswith("5") or took_us > slower_than_seconds * 1e6:
                    troubled.append(f"{component}: {line}")
        return troubled

    # -- REST API ---------------------------------------------------------------------------------
    def token(self, user: str = USER) -> str:
        """A JWT for ``user`` (the admin by default) from ``POST /auth/token``."""
        status, body = self.request("POST", "/auth/token", {"username": user, "password": self.password(user)},
                                    token=None)
        if status not in (200, 201):
            raise StackError(f"login to {self.url} failed with HTTP {status}: {body}")
        return body["access_token"]

    def request(self, method: str, path: str, body: Any = None, token: str | None = "") -> tuple[int, Any]:
        """One HTTP request; ``token=""`` logs in first, ``None`` sends no credentials. (status, JSON or text)."""
        if token == "":
            token = self.token()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return status, raw.decode(errors="replace")

    def unpause(self, dag_id: str, token: str = "") -> None:
        status, body = self.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False}, token=token)
        if status != 200:
            raise StackError(f"unpausing {dag_id} failed with HTTP {status}: {body}")

    def trigger(self, dag_id: str, conf: dict[str, Any], token: str = "") -> tuple[int, Any]:
        """``POST /api/v2/dags/{dag_id}/dagRuns`` with ``conf``: (status, body)."""
        return self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf},
                            token=token)

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 600.0, token: str = "") -> dict[str, Any]:
        """Poll the run until it ends (success or failed); its last JSON."""
        token = token or self.token()
        deadline = time.monotonic() + timeout
        while True:
            status, run = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}", token=token)
            if status == 200 and run["state"] in ("success", "failed"):
                return run
            if time.monotonic() > deadline:
                raise StackError(f"run {run_id} of {dag_id} still {run if status == 200 else status} after "
                                 f"{timeout:.0f}s; scheduler log: {self.log_tail('scheduler', 1500)}")
            time.sleep(2)

    def task_instances(self, dag_id: str, run_id: str, token: str = "") -> dict[str, dict[str, Any]]:
        status, body = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=100",
                                    token=token)
        if status != 200:
            raise StackError(f"listing task instances of {run_id} failed with HTTP {status}: {body}")
        return {ti["task_id"]: ti for ti in body["task_instances"]}

    # -- life cycle -------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop every component and its children (process groups): TERM, then KILL what is left."""
        for proc in self.processes.values():
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in self.processes.values():
            try:
                proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)  # the group may outlive its leader (task runners, gunicorn)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self) -> AirflowStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stack_env(home: Path, dags_folder: Path, port: int, execution_port: int, extra: dict[str, str] | None = None,
              parallelism: int = 3) -> dict[str, str]:
    """The environment every component shares: its home, DAGs, login, loopback port, small sizes."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(Path(dags_folder).resolve()),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": str(parallelism),
        "AIRFLOW__CORE__AUTH_MANAGER": AUTH_MANAGER,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin,{VIEWER}:viewer,{ANNOUNCER}:op",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{execution_port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
        # Each parse imports Airflow and the provider: re-parsing unchanged files every 30 s (the default) costs
        # a core-second a file on a small machine, where Spark needs the CPU.
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": f"{__name__}.SQLITE_CONNECT_ARGS",
        **LOOPBACK_ENV,  # the drivers the stack's tasks launch inherit it
        **(extra or {}),
    }


def job_defaults_env(job_home: str, topics: list[str], group: str, output_path: str) -> dict[str, str]:
    """Point the example DAGs' defaults (their Params) at one job: a scheduled run (``stream_verify`` every five
    minutes) then checks that job. The dag-processor reads them when it parses the DAGs (see ``params.py``)."""
    return {"STREAM_JOB_HOME": str(job_home), "STREAM_TOPICS": ",".join(topics), "STREAM_GROUP": group,
            "STREAM_OUTPUT": str(output_path)}


def start_airflow_stack(home: Path, dags_folder: Path, extra_env: dict[str, str] | None = None,
                        port: int | None = None, timeout: float = 240.0) -> AirflowStack:
    """Migrate the database, start the five components and wait until they all report healthy."""
    home = Path(home)
    (home / "logs").mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    execution_port = free_port()
    stack = AirflowStack(home, port, execution_port, stack_env(home, dags_folder, port, execution_port, extra_env))
    ports = {"api-server": port, "execution-api": execution_port}
    password_file = stack.password_file
    if not password_file.exists():
        password_file.touch(mode=0o600)
    known = json.loads(password_file.read_text() or "{}")
    password_file.write_text(json.dumps({user: known.get(user) or secrets.token_urlsafe(12)
                                         for user in (USER, VIEWER, ANNOUNCER)}) + "\n")
    # The connection the drivers the stack launches announce their output assets through (hooks.airflow_api).
    stack.env.setdefault("AIRFLOW_CONN_AIRFLOW_API", json.dumps({
        "conn_type": "http", "host": stack.url, "login": ANNOUNCER, "password": stack.password(ANNOUNCER)}))
    airflow = str(Path(sys.executable).with_name("airflow"))
    with open(stack.log_path("db-migrate"), "w") as log:
        migrated = subprocess.run([airflow, "db", "migrate"], env=stack.env, cwd=home, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=600)
    if migrated.returncode != 0:
        raise StackError(f"airflow db migrate failed: {stack.log_tail('db-migrate')}")
    _write_ahead_log(home / "airflow.db")
    try:
        for name in COMPONENTS:
            with open(stack.log_path(name), "w") as log:
                command = [airflow, *COMMANDS[name], *(["--port", str(ports[name])] if name in ports else [])]
                stack.processes[name] = subprocess.Popen(command, env=stack.env, cwd=home, stdout=log,
                                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                         start_new_session=True)
        _wait_healthy(stack, timeout)
    except BaseException:
        stack.stop()
        raise
    return stack


def _write_ahead_log(database: Path) -> None:
    """Switch the stack's SQLite database to WAL mode (it stays so in the file), before any component opens it."""
    with closing(sqlite3.connect(database)) as connection:
        mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode != "wal":
        raise StackError(f"SQLite refused WAL mode for {database} (it answered {mode!r})")


def _wait_healthy(stack: AirflowStack, timeout: float) -> None:
    """Until ``/api/v2/monitor/health`` reports every component healthy (a component that exits fails it)."""
    deadline = time.monotonic() + timeout
    health: Any = None
    while time.monotonic() < deadline:
        for name, proc in stack.processes.items():
            if proc.poll() is not None:
                raise StackError(f"airflow {name} exited with {proc.returncode}: {stack.log_tail(name)}")
        try:
            status, health = stack.request("GET", "/api/v2/monitor/health", token=None)
        except (OSError, http.client.HTTPException):  # not listening yet, or cut off while starting
            status = None
        if status == 200 and all((health.get(part) or {}).get("status") == "healthy"
                                 for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")) \
                and _answers(stack.execution_url + "health"):
            stack.ready_at = datetime.now(UTC)
            return
        time.sleep(1)
    raise StackError(f"the Airflow stack at {stack.url} (execution API at {stack.execution_url}) was not healthy within {timeout:.0f}s (last health: "
                     f"{health}); logs under {stack.home / 'logs'}")


def _finished_at(access_line: str) -> datetime | None:
    """When an api-server's access-log line was written (its first field, an ISO time in UTC), if it says."""
    try:
        return datetime.fromisoformat(access_line.split(maxsplit=1)[0])
    except ValueError:
        return None


def _answers(url: str) -> bool:
    """Whether ``url`` answers HTTP 200 (the execution API's health has no JSON worth reading)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status == 200
    except OSError:
        return False


def wait_for_dags(stack: AirflowStack, dag_ids: list[str], timeout: float = 180.0) -> None:
    """Until the dag-processor has parsed and stored every DAG named (the API knows it)."""
    token = stack.token()
    deadline = time.monotonic() + timeout
    missing = list(dag_ids)
    while missing and time.monotonic() < deadline:
        missing = [d for d in missing if stack.request("GET", f"/api/v2/dags/{d}", token=token)[0] != 200]
        if missing:
            time.sleep(2)
    if missing:
        _status, errors = stack.request("GET", "/api/v2/importErrors", token=token)
        raise StackError(f"DAGs {missing} not parsed within {timeout:.0f}s; import errors: {errors}; "
                         f"dag-processor log: {stack.log_tail('dag-processor', 1500)}")
