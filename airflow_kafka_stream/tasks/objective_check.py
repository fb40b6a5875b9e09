"""The watchdog task's lag objective check: one look after the watchdog's pass (ops.objective)."""

from __future__ import annotations

from typing import Any

from airflow_kafka_stream.core.job_watch import WaitStatus
from airflow_kafka_stream.core.objective import LagObjective
from airflow_kafka_stream.errors import JobStateError

# Lazy imports: ops.objective (storage, fsspec) waits for a check: operators import this module while Airflow
# parses their DAG file.

#: Rendered values that mean "not given" (a Param left null renders as "None").
UNSET = (None, "", "None", "null")


def refuse_bad_objective(max_lag_seconds: Any, for_seconds: Any) -> None:
    """Refuse, naming the parameter, an objective given as numbers that is not one (a templated value is
    checked once rendered)."""
    given = (max_lag_seconds, for_seconds)
    if not any(isinstance(value, str) for value in given) and given != (None, None):
        LagObjective.of(max_lag_seconds, for_seconds)


def check_objective(task: Any, context: Any, home: Any, report: dict[str, Any]) -> dict[str, Any] | None:
    """Look once at the job's lag objective (the task's ``max_lag_seconds``/``for_seconds``, else the one
    recorded in the job home; none: no check). A breach pushes ``report`` as the task's XCom and fails the task
    with the partitions, their lag and trend; lag above the objective for a shorter time is logged and carried
    to the next run by the objective's memory."""
    from airflow_kafka_stream.ops.objective import look_objective, record_objective, recorded_objective

    if task.max_lag_seconds in UNSET and task.for_seconds in UNSET:
        objective = recorded_objective(home)
        if objective is None:
            return None
    else:
        objective = LagObjective.of(task.max_lag_seconds, task.for_seconds)
        record_objective(home, objective, by=task.task_id)
    event = look_objective(home, objective, by=task.task_id)
    if event["status"] == WaitStatus.FAILED:
        context["ti"].xcom_push(key="return_value", value=report)
        raise JobStateError(f"job {task.job_home}: {event['message']}")
    (task.log.warning if event["status"] == WaitStatus.WAITING else task.log.info)("job %s: lag objective %s: %s",
                                                                          task.job_home, objective, event["message"])
    return event
