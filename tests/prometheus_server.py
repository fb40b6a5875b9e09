"""A real Prometheus server for tests (Debian's ``prometheus``, installed by scripts/setup-system).

:class:`PrometheusServer` scrapes the given targets on loopback every second, keeps its storage in a
temporary folder, listens on a free loopback port, and answers instant queries through its HTTP API
(``/api/v1/query``), as a Grafana panel or an alert rule would ask them.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

PROGRAM = "prometheus"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PrometheusServer:
    """``prometheus`` scraping ``targets`` (``host:port``) as the scrape job ``scrape_job``."""

    def __init__(self, targets: list[str], scrape_job: str = "kafka-stream-drivers") -> None:
        program = shutil.which(PROGRAM)
        assert program, "prometheus is missing: run scripts/setup-system (apt-get install prometheus)"
        self.folder = Path(tempfile.mkdtemp(prefix="aks-prometheus-"))
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "scrape_configs": [{"job_name": scrape_job, "scrape_interval": "1s", "scrape_timeout": "1s",
                                      "static_configs": [{"targets": targets}]}]}
        (self.folder / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        self.port = free_port()
        self.log = self.folder / "prometheus.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [program, f"--config.file={self.folder / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.folder / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"prometheus exited: {self.log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"prometheus not ready after {timeout}s: {self.log.read_text()[-2000:]}")

    def query(self, expression: str) -> list[dict]:
        """The instant query's series: each ``{"metric": {labels}, "value": [time, "value"]}``."""
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expression})}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def wait_for(self, expression: str, predicate, timeout: float = 60.0) -> list[dict]:
        """The query's series once ``predicate(series)`` holds (asked again every half second)."""
        deadline = time.monotonic() + timeout
        series: list[dict] = []
        while time.monotonic() < deadline:
            series = self.query(expression)
            if predicate(series):
                return series
            time.sleep(0.5)
        raise AssertionError(f"{expression}: still {series} after {timeout}s")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)
