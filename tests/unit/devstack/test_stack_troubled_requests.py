"""Which api-server requests the stack counts as a user's error or hang (pure: access-log lines in, lines out)."""

from datetime import UTC, datetime

from airflow_kafka_stream.devstack.airflow_stack import AirflowStack


def access_line(finished: str, took_seconds: float, path: str, status: int = 200) -> str:
    return (f"{finished}Z [info     ] request finished               [http.access] client_addr=127.0.0.1:1 "
            f"duration_us={int(took_seconds * 1e6)} loc=http_access_log.py:130 method=GET path={path} query= "
            f"status_code={status}")


def test_slow_or_failed_requests_after_the_stack_was_ready_count_and_its_start_up_probe_does_not(tmp_path):
    stack = AirflowStack(tmp_path, 1, 2, env={}, ready_at=datetime(2026, 12, 5, 10, 0, 0, tzinfo=UTC))
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "execution-api.log").write_text("\n".join([
        "Running the API server with uvicorn:",
        access_line("2026-12-05T10:00:20.000000", 31, "/execution/health"),  # asked at 09:59:49, while starting
        access_line("2026-12-05T10:05:00.000000", 31, "/execution/task-instances/x/run"),
        access_line("2026-12-05T10:06:00.000000", 2, "/execution/xcoms/x"),
    ]) + "\n")
    (tmp_path / "logs" / "api-server.log").write_text(access_line("2026-12-05T10:07:00.000000", 0.1,
                                                                  "/api/v2/dags/x/dagRuns", status=500) + "\n")

    troubled = stack.troubled_requests(slower_than_seconds=30)

    assert [line.split("path=")[1].split()[0] for line in troubled] == [
        "/api/v2/dags/x/dagRuns", "/execution/task-instances/x/run"]


def test_without_a_ready_time_every_slow_request_counts(tmp_path):
    stack = AirflowStack(tmp_path, 1, 2, env={})
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "execution-api.log").write_text(access_line("2026-12-05T10:00:20.000000", 31, "/h") + "\n")
    assert len(stack.troubled_requests(slower_than_seconds=30)) == 1
