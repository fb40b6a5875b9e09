"""ops.reset.run: the one dry-run / export / execute branching the CLI and the reset operator share."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_kafka_stream.ops import reset
from airflow_kafka_stream.ops.results import ResetOutcome

PLAN = SimpleNamespace(to_dict=lambda: {"plan": True})


def _outcome(verified: bool) -> ResetOutcome:
    return ResetOutcome(plan=PLAN, targets={}, sources={}, sink="none", checkpoint="/c",  # type: ignore[arg-type]
                        verified=verified)


# (id, mode, export, verified, expected calls, executed, ok, why)
CASES = [
    ("01-dry-run", reset.ResetMode.DRY_RUN, None, True, ["plan"], False, True, "plans, changes nothing"),
    ("02-dry-run-export", "dry-run", "/tmp/p.csv", True, ["plan", "export /tmp/p.csv"], False, True,
     "the plan is written as CSV; the mode may come as text"),
    ("03-execute", reset.ResetMode.EXECUTE, "/tmp/p.csv", True, ["execute export=/tmp/p.csv drop_state=True"],
     True, True, "execute writes the export itself, under the lock, from the plan it applies"),
    ("04-execute-unverified", reset.ResetMode.EXECUTE, None, False, ["execute export=None drop_state=True"], True,
     False, "an execution whose re-read disagrees is not ok (the CLI exits 1)"),
]


@pytest.mark.parametrize(("mode", "export", "verified", "calls", "executed", "ok", "why"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_run(monkeypatch, mode, export, verified, calls, executed, ok, why):
    seen: list[str] = []
    monkeypatch.setattr(reset, "plan", lambda ctx, request, now=None: seen.append("plan") or PLAN)
    monkeypatch.setattr(reset, "export_csv", lambda plan, path: seen.append(f"export {path}"))

    def execute(ctx, request, *, drop_state, allow_sink_batch_log, export, now, by):
        seen.append(f"execute export={export} drop_state={drop_state}")
        return _outcome(verified)

    monkeypatch.setattr(reset, "execute", execute)
    run = reset.run(None, reset.ResetRequest("to-earliest"), mode, export=export, drop_state=True)  # type: ignore[arg-type]
    assert seen == calls, why
    assert (run.executed, run.ok) == (executed, ok), why
    assert run.to_dict()["executed"] is executed
    assert run.plan is PLAN


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="'apply'"):
        reset.run(None, reset.ResetRequest("to-earliest"), "apply")  # type: ignore[arg-type]
