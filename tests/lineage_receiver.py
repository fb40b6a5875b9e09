"""A small OpenLineage HTTP receiver for tests, and validation of events against the spec's JSON schema.

The receiver answers ``POST /api/v1/lineage`` (any path) with 200 and keeps every event as decoded JSON;
``hang=True`` reads the request and never answers (an endpoint that hangs). ``validate_event`` checks an event
against ``tests/data/openlineage/OpenLineage.json`` (the spec, vendored with its facets: see the README there)
and each facet whose schema is known: the spec's own facets by their file name, this package's position facet by
its URL. Facets of other producers (Airflow's own) are only checked against the spec's base facet.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SPEC = Path(__file__).parent / "data" / "openlineage"


def _registry() -> tuple[Registry, dict[str, Any]]:
    schemas = {path.stem: json.loads(path.read_text()) for path in (SPEC / "facets").glob("*.json")}
    core = json.loads((SPEC / "OpenLineage.json").read_text())
    resources = [(core["$id"], Resource.from_contents(core))]
    resources += [(schema["$id"], Resource.from_contents(schema)) for schema in schemas.values()]
    return Registry().with_resources(resources), {**schemas, "OpenLineage": core}


REGISTRY, SCHEMAS = _registry()


def _validator(schema_id: str, definition: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"{schema_id}#/$defs/{definition}"}, registry=REGISTRY)


def validate_event(event: dict[str, Any], custom: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """Validate one run event; returns the names of the facets validated against their own schema.

    ``custom`` maps a facet's ``_schemaURL`` to its JSON schema (this package's own facets). Raises
    ``jsonschema.ValidationError`` on the first violation.
    """
    _validator(SCHEMAS["OpenLineage"]["$id"], "RunEvent").validate(event)
    checked = []
    places = [event["run"].get("facets"), event["job"].get("facets")]
    for dataset in event.get("inputs", []) + event.get("outputs", []):
        places += [dataset.get("facets"), dataset.get("inputFacets"), dataset.get("outputFacets")]
    for facets in places:
        for key, facet in (facets or {}).items():
            url = facet["_schemaURL"]
            if custom and url in custom:
                Draft202012Validator(custom[url]).validate(facet)
                checked.append(key)
                continue
            name = url.split("#")[0].rsplit("/", 1)[-1].removesuffix(".json")
            if "openlineage.io/spec/facets/" in url and name in SCHEMAS:
                definition = url.split("#/$defs/")[-1] if "#/$defs/" in url else name
                _validator(SCHEMAS[name]["$id"], definition).validate(facet)
                checked.append(key)
    return checked


class LineageReceiver:
    """Keeps the events POSTed to it; ``hang`` answers nothing (the client's timeout decides)."""

    def __init__(self, hang: bool = False) -> None:
        self.events: list[dict[str, Any]] = []
        self.requests = 0
        self.lock = threading.Lock()
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's API
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.requests += 1
                if hang:
                    receiver._release.wait(120)
                    return
                with receiver.lock:
                    receiver.events.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def wait_for(self, predicate, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The events once ``predicate(events)`` holds; fails with what arrived after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self.snapshot()
            if predicate(events):
                return events
            time.sleep(0.2)
        raise AssertionError(f"lineage events never matched; got {[_brief(e) for e in self.snapshot()]}")

    def close(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()


def _brief(event: dict[str, Any]) -> str:
    return f"{event.get('eventType')} {event['job']['namespace']}/{event['job']['name']} {event['run']['runId']}"


def driver_events(events: list[dict[str, Any]], job_name: str) -> list[dict[str, Any]]:
    """The events a driver emitted for ``job_name`` (not Airflow's task events)."""
    return [e for e in events if e["job"]["name"] == job_name
            and "jobType" in (e["job"].get("facets") or {})
            and e["job"]["facets"]["jobType"].get("processingType") == "STREAMING"]


def driver_runs(events: list[dict[str, Any]], job_name: str) -> dict[str, list[dict[str, Any]]]:
    """The drivers' events of ``job_name`` by run id, each run's in the order they arrived."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in driver_events(events, job_name):
        runs.setdefault(event["run"]["runId"], []).append(event)
    return runs


def check_driver_runs(events: list[dict[str, Any]], job_name: str, namespace: str,
                      launched_by_tasks: bool = True) -> dict[str, list[dict]]:
    """Every event validates; the drivers' runs of ``job_name`` are one job in ``namespace``, each run with one
    START and (``launched_by_tasks``) a parent that is an Airflow task run among ``events``. Returns the runs."""
    from airflow_kafka_stream.operators.lineage import STREAMING_JOB_SCHEMA, STREAMING_JOB_SCHEMA_URL
    from airflow_kafka_stream.runtime.lineage_events import POSITION_SCHEMA, POSITION_SCHEMA_URL

    custom = {POSITION_SCHEMA_URL: POSITION_SCHEMA, STREAMING_JOB_SCHEMA_URL: STREAMING_JOB_SCHEMA}
    for event in events:
        validate_event(event, custom)
    runs = driver_runs(events, job_name)
    assert {(e["job"]["namespace"], e["job"]["name"]) for found in runs.values() for e in found} == {
        (namespace, job_name)}
    tasks = {(e["job"]["name"], e["run"]["runId"]) for e in events
             if e["job"]["namespace"] == namespace and e["job"]["name"] != job_name}
    for run, found in runs.items():
        kinds = [e["eventType"] for e in found]
        assert kinds.count("START") == 1, (run, kinds)
        if not launched_by_tasks:
            assert all("parent" not in e["run"]["facets"] for e in found), (run, found[0]["run"]["facets"])
            continue
        parent = found[0]["run"]["facets"]["parent"]
        assert (parent["job"]["name"], parent["run"]["runId"]) in tasks, (parent, sorted(tasks))
    return runs


def launchers(runs: dict[str, list[dict[str, Any]]]) -> set[str]:
    """The Airflow tasks (``dag.task``) that launched the drivers of ``runs``."""
    return {found[0]["run"]["facets"]["parent"]["job"]["name"] for found in runs.values()}


def airflow_lineage_on(monkeypatch, receiver: LineageReceiver, namespace: str, interval_seconds: float = 5.0):
    """Airflow's ``[openlineage]`` pointed at ``receiver`` for ``dag.test()`` runs in this process; returns a
    function that turns it off again.

    The provider reads its settings once (cached) and registers its listener when its plugin is imported; a
    process that imported it unconfigured has no listener, so it is added here, and removed after. The provider
    emits from a thread rather than a fork (a fork of a process holding a JVM's sockets is not safe in tests).
    The drivers this process launches inherit the environment: the interval of their RUNNING events is set there.
    """
    from airflow.providers.openlineage import conf as ol_conf
    from airflow.providers.openlineage.plugins.listener import OpenLineageListener, get_openlineage_listener
    from airflow.sdk.listener import get_listener_manager

    def clear() -> None:
        for value in vars(ol_conf).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()

    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps({"type": "http", "url": receiver.url,
                                                                     "timeout": 5}))
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", namespace)
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD", "True")
    monkeypatch.setenv("AIRFLOW_KAFKA_STREAM_LINEAGE_INTERVAL", str(interval_seconds))
    clear()
    manager = get_listener_manager()
    added = None
    if not any(isinstance(plugin, OpenLineageListener) for plugin in manager.pm.get_plugins()):
        added = get_openlineage_listener()
        manager.add_listener(added)

    def off() -> None:
        if added is not None:
            manager.pm.unregister(added)
        for name in ("AIRFLOW__OPENLINEAGE__TRANSPORT", "AIRFLOW__OPENLINEAGE__NAMESPACE",
                     "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD", "AIRFLOW_KAFKA_STREAM_LINEAGE_INTERVAL"):
            monkeypatch.delenv(name, raising=False)
        clear()

    return off
