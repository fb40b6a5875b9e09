"""The job page's actions: which example DAG each one triggers, and the run's params built from the page's form.

Pure: a form's fields in, a run's conf out, or :class:`FormError` naming the form field and what to put
there. Airflow then validates the conf against the DAG's own Params when the run is triggered, so a conf the DAG
would refuse never becomes a run. Nothing here decides whether the operation may go ahead (the job runs, the
lock is held): the operation does, in its run, and the page shows what it said (``job_runs``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_stream.core.reset_strategy import StrategyKind, check_value, strategy_kind
from airflow_kafka_stream.errors import InvalidInputError, StreamError
from airflow_kafka_stream.plugins.state_html import SAVEPOINT_DAG

Form = Mapping[str, str]
#: The word a reset's confirmation must carry: the page shows the plan first, and only its confirm button sends it.
CONFIRM = "execute"


class FormError(InvalidInputError):
    """A form field the page refuses: ``field`` names it (a form's field, not an operation's setting)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Action:
    """One button or form of the page: the example DAG it triggers and how the run's conf is built."""

    name: str
    dag_id: str
    label: str
    build: Callable[[str, Form], dict[str, Any]]


def _switch(form: Form, key: str) -> bool:
    """An HTML checkbox: present ("on") when ticked, absent otherwise; ``true``/``false`` from scripts."""
    return str(form.get(key, "")).strip().lower() in ("on", "true", "1", "yes")


def _text(form: Form, key: str) -> str:
    return str(form.get(key) or "").strip()


def _stop(home: str, form: Form) -> dict[str, Any]:
    return {"job_home": home, "savepoint": _switch(form, "savepoint")}


def _upgrade(home: str, form: Form) -> dict[str, Any]:
    version = _text(form, "new_version")
    if not version:
        raise FormError("the new version is empty; give the version to upgrade to", "new_version")
    mode = _text(form, "mode") or "standby"
    if mode not in ("standby", "cold"):
        raise FormError(f"mode {mode!r} is neither standby nor cold", "mode")
    return {"job_home": home, "new_version": version, "application": _text(form, "application") or None,
            "check_only": _switch(form, "check_only"), "standby": mode == "standby"}


@dataclass(frozen=True)
class ResetChoice:
    """What the reset form asks for: planned first (dry run), executed after the confirmation."""

    strategy: StrategyKind
    value: str
    topics: tuple[str, ...]
    drop_state: bool

    @classmethod
    def of(cls, form: Form) -> ResetChoice:
        try:
            kind = strategy_kind(_text(form, "strategy"), user=True)
            value = check_value(kind, _text(form, "value"))
        except StreamError as exc:  # the strategy's own rules, naming the form field
            raise FormError(str(exc), str(exc.setting or "strategy")) from exc
        topics = tuple(t.strip() for t in _text(form, "topics").split(",") if t.strip())
        return cls(kind, value, topics, _switch(form, "drop_state"))

    def conf(self, home: str, execute: bool) -> dict[str, Any]:
        """The stream_offset_reset run's params (its date-time strategy takes the value in ``datetime``)."""
        dated = self.strategy is StrategyKind.TO_DATETIME
        return {"job_home": home, "strategy": self.strategy.value, "datetime": self.value if dated else None,
                "value": None if dated or not self.value else self.value, "topics": list(self.topics),
                "execute": execute, "drop_state": self.drop_state}

    def fields(self) -> dict[str, str]:
        """The choice as the form's fields again (the confirmation resends exactly what was planned)."""
        return {"strategy": self.strategy.value, "value": self.value, "topics": ",".join(self.topics),
                **({"drop_state": "on"} if self.drop_state else {})}


def _reset(home: str, form: Form) -> dict[str, Any]:
    if _text(form, "confirm") != CONFIRM:
        raise FormError("a reset is executed only from its plan's confirmation: plan it first", "confirm")
    return ResetChoice.of(form).conf(home, execute=True)


def _restore(home: str, form: Form) -> dict[str, Any]:
    savepoint = _text(form, "savepoint_id")
    if not savepoint:
        raise FormError("no savepoint chosen; pick one of the job's savepoints", "savepoint_id")
    return {"job_home": home, "savepoint_id": savepoint, "drop_state": _switch(form, "drop_state"),
            "start": _switch(form, "start"), "start_version": _text(form, "start_version")}


def _resume(home: str, form: Form) -> dict[str, Any]:
    return {"job_home": home, "app_version": _text(form, "app_version")}


def _savepoint(home: str, form: Form) -> dict[str, Any]:
    return {"job_home": home}


ACTIONS: dict[str, Action] = {a.name: a for a in (
    Action("savepoint", SAVEPOINT_DAG, "Take a savepoint now", _savepoint),
    Action("stop", "stream_stop", "Stop", _stop),
    Action("upgrade", "stream_upgrade", "Upgrade", _upgrade),
    Action("reset", "stream_offset_reset", "Reset offsets", _reset),
    Action("restore", "stream_restore", "Restore", _restore),
    Action("resume", "stream_resume", "Start again", _resume),
)}
#: Every DAG the page triggers, for the list of this job's runs.
ACTION_DAGS = tuple(dict.fromkeys(a.dag_id for a in ACTIONS.values()))


def run_outcome(history: list[Mapping[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """What the Airflow run ``run_id`` recorded in the job's history, oldest first, from the page's history rows
    (newest first; ``airflow_run`` is the run that wrote each)."""
    return [{"operation": r.get("operation"), "result": r.get("result"), "error": r.get("error")}
            for r in reversed(history) if r.get("airflow_run") == run_id]
