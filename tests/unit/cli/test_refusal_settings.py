"""Every refusal names the settings that get the user out, and each front end spells them its own way.

The operations (``ops/``, ``core/``) name settings (``drop_state``, ``scope``...) in ``StreamError.settings``;
the CLI adds the flag of each (``cli.flags.OPTION_OF_SETTING``), an operator its parameter
(``tasks/refusals.py``). A refusal with several reasons names them all in one message.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kafka_stream import errors
from airflow_kafka_stream.cli import build_parser
from airflow_kafka_stream.cli.flags import OPTION_OF_SETTING, refusal_text
from airflow_kafka_stream.core.sink import Sink
from airflow_kafka_stream.errors import InvalidInputError, JobStateError, Refusals, StreamError
from airflow_kafka_stream.tasks.refusals import parameter_for, refusals_name_parameters

PACKAGE = Path(errors.__file__).parent
WALKED = ("ops", "core")

#: (module, function, error class) -> (how many raises without a setting, why no setting gets the user out).
NO_SETTING = {
    ("ops/guard.py", "ensure_not_running", "JobStateError"):
        (1, "the job runs: stopping it is an operation, not a setting"),
    ("ops/guard.py", "ensure_group_unused", "JobStateError"):
        (2, "another consumer is a member of the job's group: stopping it is for its owner, not a setting"),
    ("ops/reset.py", "_preflight", "JobStateError"):
        (1, "a batch in flight: the job must run it and stop gracefully first"),
    ("ops/savepoints.py", "create_locked", "JobStateError"):
        (2, "nothing committed to save yet: the job must run first"),
    ("ops/savepoints.py", "create_live", "JobStateError"): (1, "nothing committed to save yet: the job must run first"),
    ("core/live_copy.py", "store_files", "SavepointError"):
        (1, "state files of checkpoint format 2: such a job is stopped for its savepoint, nothing is set"),
    ("core/live_copy.py", "rocksdb_shared_files", "CheckpointFormatError"):
        (2, "a RocksDB checkpoint of a format this package cannot read: restored from a savepoint, not set"),
    ("core/live_copy.py", "live_savepoint_refusal", "JobStateError"):
        (3, "the job is starting, stopping or not running: its state decides, not a setting"),
    ("ops/savepoints.py", "delete", "JobStateError"): (1, "pinned by an upgrade in progress, until it ends"),
    ("ops/savepoints.py", "resolve_id", "JobStateError"):
        (1, "'latest' names no savepoint: the job has none yet, one is taken (a stop, savepoint create), not set"),
    ("ops/standby.py", "launch_standby", "JobStateError"):
        (2, "a standby already lives, or there is no running job to stand by for"),
    ("ops/standby.py", "give_up", "JobStateError"):
        (1, "the standby did not come up: its log says why; the running job was not touched"),
    ("ops/standby.py", "end_standby", "JobStateError"): (1, "the standby is taking over: stop the job instead"),
    ("ops/standby.py", "end_live_standby", "JobStateError"): (1, "there is no live standby to end"),
    ("ops/standby.py", "hand_over", "JobStateError"):
        (2, "the old version still runs, or the standby can no longer take over: the upgrade's state"),
    ("ops/stop.py", "request_stop", "JobStateError"): (1, "the job never reported a status: nothing to stop"),
    ("ops/stop.py", "complete_stop", "JobStateError"): (1, "the job has not stopped yet: nothing to save"),
    ("ops/stop.py", "_savepoint", "JobStateError"):
        (1, "a batch in flight: the job must run it again before a consistent savepoint exists"),
    ("ops/submit.py", "submit", "JobStateError"): (1, "another version runs or starts: the job's state"),
    ("ops/unstarted.py", "UnstartedGeneration.offsets", "JobStateError"):
        (1, "start offsets are resolved by Kafka when the job starts: it must start first"),
    ("ops/unstarted.py", "UnstartedGeneration.refusal", "JobStateError"):
        (1, "no batch committed on the new generation yet: the job must start first"),
    ("ops/watchdog.py", "watch", "WatchdogGaveUp"): (1, "the watchdog gave up: the job's failure must be fixed"),
    ("ops/upgrade.py", "decide_outcome", "JobStateError"):
        (1, "the upgrade failed before any downtime: its standby or stop step says why; nothing changed"),
    ("core/metrics_settings.py", "*", "InvalidInputError"):
        (6, "a driver's OpenTelemetry variable, named in the message with its fix: no option or parameter gives "
            "it (ops/spark_submit.check_metrics_env names spark_conf when a Spark setting sets it)"),
    ("core/checkpoint_log.py", "*", "CheckpointFormatError"):
        (16, "a damaged or foreign checkpoint file, or an offset-log form the tools do not read (named sources, a "
             "version newer than v2): restored from a savepoint or read by a newer release, not set"),
    ("core/kafka_sources.py", "KafkaSources.require_one_position_per_partition", "InvalidInputError"):
        (1, "the query reads a partition in two sources: its design, not a setting"),
    ("core/kafka_sources.py", "KafkaSources.source_of", "InvalidInputError"):
        (1, "the query reads a partition in two sources: its design, not a setting"),
    ("core/offsets.py", "parse_offsets_json", "CheckpointFormatError"):
        (6, "parses stored offsets as well as values; a caller parsing a user's value re-raises naming it "
            "(reset_strategy._offsets_json)"),
    ("core/reset_strategy.py", "ResetStrategy.by_duration", "OffsetPlanError"): (1, "the caller's clock, not input"),
    ("core/reset_strategy.py", "parse_strategy", "OffsetPlanError"): (1, "the caller's clock, not input"),
    ("core/reset_plan.py", "_planned_row", "OffsetPlanError"): (1, "the caller fetched no watermarks: a bug"),
    ("core/reset_plan.py", "_requested", "OffsetPlanError"): (1, "the caller looked up no offsets: a bug"),
    ("core/state_metadata.py", "*", "CheckpointFormatError"):
        (3, "a state metadata file Spark wrote is unreadable: reported for its operator, not set"),
    ("core/state_schema.py", "*", "CheckpointFormatError"):
        (3, "a state schema file Spark wrote is unreadable: reported for its store, not set"),
    ("core/savepoint_manifest.py", "*", "SavepointError"):
        (5, "a damaged or foreign savepoint: another savepoint is chosen, not a setting"),
    ("core/sink.py", "sink_from_spec", "InvalidInputError"):
        (2, "job.json's own record is invalid: fixed there or by restarting the job, no option overrides it"),
    ("core/spark_kafka_options.py", "connector_options", "InvalidInputError"):
        (1, "a job's own StreamConfig.source_options, set in its code: named in the message, no option gives them"),
    ("core/watermarks.py", "ask_until_valid", "KafkaAccessError"):
        (1, "the brokers keep answering invalid offsets: transient, retried, not a setting"),
    ("ops/submit.py", "check_sink_transactions", "KafkaAccessError"):
        (1, "the cluster refuses the job's transactions: a grant or the transaction log, named in the message"),
}

#: Settings no CLI command takes, each with why, and the operator that takes it.
OPERATOR_ONLY = {
    "poll_seconds": ("the CLI looks at the job in its own loop", "StreamStopOperator"),
    "spark_conn_id": ("the CLI launches spark-submit itself, with --master", "StreamSubmitOperator"),
    "kafka_conn_id": ("the CLI reads client settings from --command-config", "StreamSubmitOperator"),
}
#: Settings no operator takes, each with why.
CLI_ONLY = {
    "command_config": "operators take Kafka client settings from a connection, not a properties file",
    "checkpoint": "operators work on a job home's current checkpoint, never a bare one",
    "spark_submit": "operators launch through SparkSubmitHook, which finds spark-submit through the connection",
    **{name: "the upgrade task group hands these to its health sensor and tasks, whose parameters are named "
             "for what they do there (min_batches, window_seconds, timeout_seconds...)"
       for name in ("health_batches", "health_timeout_seconds", "stop_timeout_seconds", "start_timeout_seconds",
                    "standby_ready_timeout_seconds")},
}
#: Settings passed to a refusal through a variable (``setting=setting``), as their callers give them.
INDIRECT = {"job_home", "checkpoint", "bootstrap_servers", "group", "stall_threshold", "max_age"}


def _raises(path: Path) -> list[tuple[str, str, ast.Call]]:
    """(function qualname, error class, call) of every ``<StreamError subclass>(...)`` built in ``path``.

    Built, not only raised: a refusal may be collected (``Refusals.add``) or returned to be raised.
    """
    found: list[tuple[str, str, ast.Call]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{where}.{child.name}" if where else child.name
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Name):
                kind = getattr(errors, child.func.id, None)
                if isinstance(kind, type) and issubclass(kind, StreamError):
                    found.append((inner, child.func.id, child))
            visit(child, inner)

    visit(ast.parse(path.read_text()), "")
    return found


def _refusals() -> list[tuple[str, str, str, ast.Call]]:
    """Every refusal raised in ops/ and core/ (an OperationIncompleteError is not one: something changed)."""
    return [(str(path.relative_to(PACKAGE)), where, kind, call)
            for folder in WALKED for path in sorted((PACKAGE / folder).glob("*.py"))
            for where, kind, call in _raises(path) if kind != "OperationIncompleteError"]


def _setting_of(call: ast.Call) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == "setting"), None)


def _settings_used() -> set[str]:
    """Every setting name a refusal anywhere in the package gives literally (or through a module constant)."""
    used = set(INDIRECT)
    for path in PACKAGE.rglob("*.py"):
        module = None
        for _where, _kind, call in _raises(path):
            value = _setting_of(call)
            for node in ast.walk(value) if value is not None else ():
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    used.add(node.value)
                elif isinstance(node, ast.Name) and node.id.isupper():
                    dotted = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
                    module = module or importlib.import_module(dotted)
                    used.add(getattr(module, node.id))
    return used


def _cli_options() -> set[str]:
    """Every option string some command of the CLI accepts."""
    options: set[str] = set()
    parsers = [build_parser()]
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            options.update(action.option_strings)
            if action.choices and isinstance(action.choices, dict):
                parsers.extend(a for a in action.choices.values() if hasattr(a, "_actions"))
    return options


def test_every_refusal_names_its_setting_or_says_why_none_applies():
    counted: dict[tuple[str, str, str], int] = {}
    for module, where, kind, call in _refusals():
        if _setting_of(call) is not None:
            continue
        key = (module, where, kind) if (module, where, kind) in NO_SETTING else (module, "*", kind)
        assert key in NO_SETTING, f"{module} {where}: raise {kind}(...) names no setting and has no reason why"
        counted[key] = counted.get(key, 0) + 1
    assert counted == {key: count for key, (count, _why) in NO_SETTING.items()}, "the allow-list is stale"
    assert all(why for _count, why in NO_SETTING.values())


def test_the_walk_sees_the_refusals():
    """A walk that found nothing would pass the test above."""
    found = _refusals()
    assert len(found) > 100
    assert any(where == "_state_not_carried" and _setting_of(call) is not None for _m, where, _k, call in found)


def test_every_setting_has_a_cli_option_argparse_accepts():
    accepted = _cli_options()
    used = _settings_used()
    assert "drop_state" in used and "takeover_stopped" in used and "job_home_shared" in used
    for setting in sorted(used - set(OPERATOR_ONLY)):
        assert setting in OPTION_OF_SETTING, f"{setting}: no CLI option in OPTION_OF_SETTING"
    for setting, text in OPTION_OF_SETTING.items():
        flags = re.findall(r"--[a-z][a-z-]*", text)
        assert flags, f"{setting}: {text!r} names no option"
        assert set(flags) <= accepted, f"{setting}: {sorted(set(flags) - accepted)} is not an option of the CLI"


def test_every_setting_has_an_operator_parameter():
    from airflow_kafka_stream.operators import reset, savepoints, standby, stop, submit, verify, watchdog

    operators = [reset.StreamResetOperator, savepoints.StreamRestoreOperator,
                 savepoints.StreamSavepointHousekeepingOperator, stop.StreamStopOperator,
                 submit.StreamSubmitOperator, standby.UpgradeSubmitOperator, verify.StreamVerifyOperator,
                 watchdog.StreamWatchdogOperator]
    for setting in sorted(_settings_used() - set(CLI_ONLY)):
        assert any(parameter_for(op, setting) for op in operators), f"{setting}: no operator takes it"
    for setting, (_why, name) in OPERATOR_ONLY.items():
        assert any(op.__name__ == name and parameter_for(op, setting) for op in operators), setting


@pytest.mark.parametrize(
    ("module", "operator", "setting", "parameter"),
    [
        pytest.param("reset", "StreamResetOperator", "drop_state", "drop_state", id="1-same-name"),
        pytest.param("reset", "StreamResetOperator", "scope", "topics", id="2-the-scope-is-the-topics-list"),
        pytest.param("reset", "StreamResetOperator", "sink_kind", "sink_kind",
                     id="3-a-sink-refusal-can-be-answered-from-a-dag"),
        pytest.param("reset", "StreamResetOperator", "bootstrap_servers", "kafka_conn_id",
                     id="4-brokers-come-from-the-connection"),
        pytest.param("savepoints", "StreamRestoreOperator", "allow_sink_batch_log", "allow_sink_batch_log",
                     id="5-restore-takes-the-sink-override"),
        pytest.param("stop", "StreamStopOperator", "timeout", "timeout_seconds", id="6-stop-says-seconds"),
        pytest.param("standby", "UpgradeSubmitOperator", "takeover_stopped", "takeover_stopped",
                     id="7-inherited-and-own-parameters-both-count"),
        pytest.param("submit", "StreamSubmitOperator", "master", "spark_conn_id",
                     id="8-the-master-is-the-spark-connection-host"),
        pytest.param("savepoints", "StreamRestoreOperator", "scope", None, id="9-no-parameter-no-name"),
    ],
)
def test_operator_parameter_of_a_setting(module, operator, setting, parameter):
    cls = getattr(importlib.import_module(f"airflow_kafka_stream.operators.{module}"), operator)
    assert parameter_for(cls, setting) == parameter


def test_an_operator_refusal_names_its_parameters(monkeypatch):
    """A reset operator's refused execute: the operation's message, then the operator's parameters."""
    from airflow_kafka_stream.hooks.stream_job import StreamJobHook
    from airflow_kafka_stream.operators.reset import StreamResetOperator
    from airflow_kafka_stream.ops import reset

    refused = JobStateError("the reset is refused for 2 reasons", setting=("scope", "drop_state", "checkpoint"))

    def execute(*_args: Any, **_kwargs: Any) -> None:
        raise refused

    monkeypatch.setattr(StreamJobHook, "context", lambda self, **kwargs: None)
    monkeypatch.setattr(reset, "execute", execute)
    task = StreamResetOperator(task_id="reset", job_home="/jobs/orders", strategy="to-earliest", execute=True)
    with pytest.raises(JobStateError) as info:
        task.execute({"ti": SimpleNamespace(xcom_push=lambda **kwargs: None)})
    assert str(info.value) == ("the reset is refused for 2 reasons "
                               "[StreamResetOperator parameters: topics (scope), drop_state]")
    assert info.value.settings == ("scope", "drop_state", "checkpoint")
    assert info.value.__cause__ is refused


def test_an_operator_translates_once_and_leaves_other_errors_alone():
    from airflow.sdk import BaseOperator

    @refusals_name_parameters
    class Base(BaseOperator):
        def __init__(self, *, drop_state: bool = False, **kwargs: Any) -> None:
            super().__init__(task_id="t", **kwargs)

        def execute(self, context: Any) -> None:
            raise InvalidInputError("bad", setting="drop_state")

    @refusals_name_parameters
    class Sub(Base):
        def execute(self, context: Any) -> None:
            super().execute(context)

        def later_complete(self, context: Any, event: dict) -> None:
            raise InvalidInputError("unknown", setting="no_such_setting")

    with pytest.raises(InvalidInputError, match=r"^bad \[Sub parameter: drop_state\]$"):
        Sub().execute({})
    with pytest.raises(InvalidInputError, match=r"^unknown$"):
        Sub().later_complete({}, {})


# -- several reasons, one message ---------------------------------------------------------------------

def test_refusals_raise_every_reason_at_once():
    found = Refusals("the reset")
    found.add(JobStateError("first problem; fix it", setting="drop_state"))
    found.check(lambda: (_ for _ in ()).throw(JobStateError("second problem.", setting=("sink_kind",))))
    found.check(lambda: None)
    with pytest.raises(JobStateError) as info:
        found.raise_any()
    assert str(info.value) == ("the reset is refused for 2 reasons; nothing was changed. (1) first problem; fix it. "
                               "(2) second problem.")
    assert info.value.settings == ("drop_state", "sink_kind") and info.value.setting == "drop_state"


def test_refusals_of_different_kinds_share_their_common_kind():
    found = Refusals("the restore")
    found.add(InvalidInputError("a", setting="drop_state"))
    found.add(JobStateError("b", setting="drop_state"))
    with pytest.raises(StreamError) as info:
        found.raise_any()
    assert type(info.value) is StreamError and info.value.settings == ("drop_state",)


def test_one_reason_is_raised_as_it_is():
    alone = JobStateError("only", setting="drop_state")
    found = Refusals("the reset")
    found.add(alone)
    with pytest.raises(JobStateError) as info:
        found.raise_any()
    assert info.value is alone
    Refusals("nothing").raise_any()


def test_the_cli_names_every_flag():
    assert refusal_text("m", ("drop_state", "allow_sink_batch_log", "poll_seconds")) == (
        "m [drop_state: --drop-state; allow_sink_batch_log: --allow-sink-batch-log]")
    assert refusal_text("m", "job_home") == "m [job_home: --job-home]"
    assert refusal_text("m", ()) == "m"


def _sink_log(path: Path, batches: int) -> str:
    (path / "_spark_metadata").mkdir(parents=True)
    for batch in range(batches):
        (path / "_spark_metadata" / str(batch)).write_text("v1\n")
    return str(path)


ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


@pytest.mark.parametrize(
    ("provider", "in_flight", "sink", "drop_state", "allow", "sources", "settings", "phrases"),
    [
        pytest.param(ROCKSDB, None, "no-log", False, False, [0], ("sink_kind", "sink_path", "drop_state"),
                     ["2 reasons", "no _spark_metadata", "RocksDB"],
                     id="1-file-sink-without-log-and-rocksdb-named-together"),
        pytest.param(ROCKSDB, None, "ahead", False, False, [0], ("drop_state", "allow_sink_batch_log"),
                     ["RocksDB", "with drop_state it would then be refused for this too", "silently skip batches 0..2"],
                     id="2-rocksdb-says-what-drop-state-would-meet-next"),
        pytest.param(ROCKSDB, None, "ahead", False, True, [0], ("drop_state",), ["RocksDB"],
                     id="3-allowed-sink-log-leaves-drop-state-alone"),
        pytest.param(HDFS, 7, "no-log", False, False, [0], ("sink_kind", "sink_path"),
                     ["2 reasons", "batch 7 is in flight", "no _spark_metadata"],
                     id="4-a-setting-less-reason-is-named-with-the-others"),
        pytest.param(HDFS, None, "ahead", True, False, [0, 1], ("drop_state", "allow_sink_batch_log"),
                     ["2 reasons", "2 Kafka sources", "silently skip"],
                     id="5-drop-state-with-two-sources-and-a-sink-ahead"),
        pytest.param(HDFS, None, "ahead", False, False, [0], None, [],
                     id="6-hdfs-state-and-a-logged-sink-append-fine"),
    ],
)
def test_reset_preflight_names_every_reason(tmp_path, provider, in_flight, sink, drop_state, allow, sources,
                                            settings, phrases):
    from airflow_kafka_stream.ops.reset import _preflight

    out = tmp_path / "out"
    out.mkdir()
    path = _sink_log(out, 3) if sink == "ahead" else str(out)
    ctx = SimpleNamespace(home=object(), sink=Sink("file", path), storage_options={})
    pos = SimpleNamespace(url=str(tmp_path / "ck"), in_flight_batch_id=in_flight, stateful=True,
                          state_store_provider=provider, kafka_sources=lambda: SimpleNamespace(indexes=sources))
    if settings is None:
        _preflight(ctx, pos, drop_state, allow)  # type: ignore[arg-type]
        return
    with pytest.raises(StreamError) as info:
        _preflight(ctx, pos, drop_state, allow)  # type: ignore[arg-type]
    assert info.value.settings == settings
    for phrase in phrases:
        assert phrase in str(info.value), str(info.value)
