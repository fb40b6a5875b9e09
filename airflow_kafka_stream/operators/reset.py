"""Reset a job's offsets from a DAG: checkpoint and consumer group together, dry run unless told to execute."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_kafka_stream.core.reset_strategy import StrategyKind, check_value, strategy_kind
from airflow_kafka_stream.core.values import flag
from airflow_kafka_stream.hooks.stream_job import StreamJobHook
from airflow_kafka_stream.links.job_page import JobHomeTask
from airflow_kafka_stream.operators.lineage import JobLineage
from airflow_kafka_stream.tasks.refusals import refusals_name_parameters

# Lazy imports: ops.reset, render.reset, operators.submit (its trigger) and stream_stats wait for execute(), so a
# DAG file's parse does not load them.

#: The strategies the ``strategy`` parameter takes, as the CLI names them (core.reset_strategy.StrategyKind).
STRATEGIES = tuple(kind.value for kind in StrategyKind.choices())


@refusals_name_parameters
class StreamResetOperator(JobLineage, JobHomeTask, BaseOperator):
    """Plan, and with ``execute=True`` apply, an offset reset of the job's checkpoint and group.

    The plan (one row per partition: checkpoint, group, watermarks, requested and new offset) is logged
    as a table and pushed to XCom; an executed reset adds what was written and the verification.
    A reset is refused while the job runs, and changes nothing when refused.

    :param job_home: the job's home directory (path or URL). Templated.
    :param strategy: one of ``to-current``, ``to-offset``, ``to-datetime``, ``to-earliest``, ``to-latest``,
        ``shift-by``, ``by-duration``, ``from-file``, ``to-savepoint`` (``STRATEGIES``). Templated.
    :param value: the strategy's value: an offset or ``topic:partition=offset,...``, an ISO 8601 date-time
        with a zone, a signed shift, an ISO 8601 duration, a CSV file path, or a savepoint id. Templated.
    :param topics: scope: ``topic`` or ``topic:0,1`` items (default: all the job's topics). Templated.
    :param timezone: zone for a date-time given without one (e.g. ``Europe/Berlin``).
    :param strict: refuse targets outside the partition's [low, high] instead of clamping them.
    :param execute: apply the plan (default False: a dry run that changes nothing).
    :param export: write the plan as CSV (kafka-consumer-groups.sh format) to this path. Templated.
    :param drop_state: start a new checkpoint generation at the targets, dropping operator state.
    :param allow_sink_batch_log: with ``drop_state``, proceed although a file sink logs batch ids.
    :param sink_kind: ``file``, ``idempotent`` or ``none``, over the sink job.json records (see core.sink).
    :param sink_path: the file sink's output directory, over the one job.json records.
    :param kafka_conn_id: the ``kafka`` connection of the job's cluster.
    :param storage_conn_id: connection with fsspec storage options for a job home that is not local.
    :param group: the consumer group (default: the job's). Templated.
    """

    template_fields: Sequence[str] = ("job_home", "strategy", "value", "topics", "export", "group", "execute_reset",
                                      "drop_state")

    def __init__(self, *, job_home: str, strategy: str, value: str | None = None,
                 topics: Sequence[str] | None = None, timezone: str | None = None, strict: bool = False,
                 execute: bool = False, export: str | None = None, drop_state: bool = False,
                 allow_sink_batch_log: bool = False, kafka_conn_id: str = "kafka_default",
                 storage_conn_id: str | None = None, group: str | None = None, sink_kind: str | None = None,
                 sink_path: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_home = job_home
        self.strategy = strategy
        self.value = value
        self.topics = topics  # a template renders to a list only at run time
        self.timezone = timezone
        self.strict = strict
        self.execute_reset = execute
        self.export = export
        self.drop_state = drop_state
        self.allow_sink_batch_log = allow_sink_batch_log
        self.kafka_conn_id = kafka_conn_id
        self.storage_conn_id = storage_conn_id
        self.group = group
        self.sink_kind = sink_kind
        self.sink_path = sink_path
        if "{{" not in strategy:
            check_strategy(strategy, value)

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_kafka_stream.operators.submit import as_list
        from airflow_kafka_stream.ops import reset
        from airflow_kafka_stream.render.reset import reset_run_text

        # Rendered from params, a switch arrives as text: "False" must never read as true.
        self.execute_reset = flag(self.execute_reset, "execute")
        self.drop_state = flag(self.drop_state, "drop_state")
        kind = check_strategy(self.strategy, self.value)
        request = reset.ResetRequest(kind, self.value or None, [t for t in as_list(self.topics) if t],
                                     self.timezone, self.strict)
        hook = StreamJobHook(self.job_home, self.kafka_conn_id, self.storage_conn_id)
        ctx = hook.context(group=self.group, sink_kind=self.sink_kind, sink_path=self.sink_path)
        mode = reset.ResetMode.EXECUTE if self.execute_reset else reset.ResetMode.DRY_RUN
        run = reset.run(ctx, request, mode, export=self.export, drop_state=self.drop_state,
                        allow_sink_batch_log=self.allow_sink_batch_log)
        self.log.info("reset of %s (%s):\n%s", self.job_home,
                      "executed" if run.executed else "dry run: nothing changed", reset_run_text(run))
        if run.executed:
            from airflow_kafka_stream.operators import stream_stats

            stream_stats.incr(stream_stats.RESETS_EXECUTED, ctx.home.spec().get("job"))
        return run.to_dict()


def check_strategy(strategy: str, value: str | None) -> StrategyKind:
    """Refuse an unknown strategy or a missing/extra value, naming the argument (the rules of StrategyKind)."""
    kind = strategy_kind(strategy, user=True)
    check_value(kind, value)
    return kind
