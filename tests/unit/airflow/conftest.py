"""The job page plugin's app for route tests, with Airflow's login and permission checks stubbed (the full stack
checks them for real)."""

from __future__ import annotations

import pytest


@pytest.fixture
def client(monkeypatch):
    """The plugin's app with Airflow's login and permission checks replaced by a signed-in user."""
    from fastapi.testclient import TestClient

    from airflow_kafka_stream.plugins import job_page

    app = job_page.create_app()

    class User:
        def get_name(self) -> str:
            return "alice"

    def allow() -> None:
        return None

    for dependant in [d for route in app.routes if hasattr(route, "dependant") for d in route.dependant.dependencies]:
        if dependant.call is not None:
            app.dependency_overrides[dependant.call] = allow
    from airflow.api_fastapi.core_api.security import get_user

    app.dependency_overrides[get_user] = User
    triggered: list[tuple] = []
    monkeypatch.setattr(job_page, "known_homes", lambda dag_id=None: ["/jobs/orders"])
    monkeypatch.setattr(job_page, "_trigger", lambda dag_id, conf, user: triggered.append((dag_id, conf, user))
                        or "manual__2026-11-22T10:15:00+00:00")
    with TestClient(app) as test_client:
        test_client.triggered = triggered
        yield test_client
