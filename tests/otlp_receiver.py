"""A small OTLP/HTTP metrics receiver for tests and the benchmark: decodes what a driver exports.

It answers ``POST /v1/metrics`` with 200 and keeps every data point as ``(name, value, attributes,
resource attributes)``; ``refuse=True`` answers 503 instead (an endpoint that refuses).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _value(point):
    return point.as_double if point.HasField("as_double") else float(point.as_int)


def _attributes(keyvalues) -> dict:
    out = {}
    for kv in keyvalues:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind) if kind else None
    return out


class OtlpReceiver:
    def __init__(self, refuse: bool = False, port: int = 0) -> None:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

        self.points: list[tuple[str, float, dict, dict]] = []
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's API
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if refuse:
                    self.send_response(503)
                    self.end_headers()
                    return
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                found = []
                for rm in request.resource_metrics:
                    resource = _attributes(rm.resource.attributes)
                    for sm in rm.scope_metrics:
                        for metric in sm.metrics:
                            data = metric.sum if metric.HasField("sum") else metric.gauge
                            for point in data.data_points:
                                found.append((metric.name, _value(point), _attributes(point.attributes), resource))
                with receiver.lock:
                    receiver.requests += 1
                    receiver.points.extend(found)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def latest(self) -> dict[tuple[str, tuple], float]:
        """The newest value of each (metric, attributes)."""
        with self.lock:
            return {(name, tuple(sorted(attrs.items()))): value for name, value, attrs, _ in self.points}

    def names(self) -> set[str]:
        with self.lock:
            return {name for name, *_ in self.points}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve_in_a_process() -> None:
    """``python -m tests.otlp_receiver``: serve on a free port, print it, and print the number of requests
    received when stdin closes. The benchmark runs its receiver so, apart from the driver it measures: in
    the driver's process, decoding the exports would take the driver's interpreter lock."""
    import sys

    receiver = OtlpReceiver()
    print(receiver.server.server_port, flush=True)
    sys.stdin.read()
    print(receiver.requests, flush=True)
    receiver.close()


if __name__ == "__main__":
    serve_in_a_process()
