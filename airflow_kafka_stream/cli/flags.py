"""The CLI's spelling of the operations' settings: the flag that gives each, added to a refusal that names it.

An operation's refusal names settings (``StreamError.settings``: ``drop_state``,
``scope``...), never a front end's spelling; the CLI adds its flags here, an
operator its parameters (``tasks/refusals.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_kafka_stream.core.reset_strategy import StrategyKind


def strategy_flag(kind: StrategyKind) -> str:
    """A reset strategy's option: ``--`` and its name (``--to-offset``), as kafka-consumer-groups.sh spells it."""
    return f"--{kind.value}"


#: An operation's setting -> the CLI option that gives it, added to a refusal that names the setting.
OPTION_OF_SETTING = {
    "job_home": "--job-home",
    "checkpoint": "--checkpoint",
    "bootstrap_servers": "--bootstrap-server",
    "group": "--group",
    "timeout": "--timeout",
    "on_timeout": "--on-timeout",
    "savepoint_id": "the savepoint id (restore: --savepoint)",
    "keep_last": "--keep-last",
    "max_age": "--keep-within",
    "scope": "--topic",
    "topics": "--topic",
    "output_path": "--output",
    "timezone": "--timezone",
    "export": "--export",
    "sink_kind": "--sink-kind",
    "sink_path": "--sink-path",
    "allow_sink_batch_log": "--allow-sink-batch-log",
    "drop_state": "--drop-state",
    "hot_standby": "--hot-standby",
    "app_version": "--app-version",
    "value": f"the strategy's value (e.g. {strategy_flag(StrategyKind.TO_OFFSET)}, "
             f"{strategy_flag(StrategyKind.FROM_FILE)})",
    "strategy": f"a strategy option ({', '.join(strategy_flag(k) for k in StrategyKind.choices()[:3])}, ...)",
    "strict": "--strict",
    "command_config": "--command-config",
    "storage_options": "--storage-options",
    "stall_threshold": "--stall-threshold",
    "window": "--window",
    "kill_timeout": "--kill-timeout",
    "master": "--master",
    "spark_conf": "--conf",
    "deploy_mode": "--deploy-mode",
    "executor_environment": "--executor-environment",
    "job_home_shared": "--job-home-shared",
    "kafka_connector": "--kafka-connector",
    "source": "--source",
    "output_asset": "--output-asset",
    "output_topic": "--output-topic",
    "skip_replays": "--skip-replays",
    "asset_every": "--asset-every",
    "watermark_delay": "--watermark-delay",
    "application": "--application",
    "spark_submit": "--spark-submit",
    "takeover_stopped": "--takeover-stopped",
    "health_batches": "--health-batches, --health-window, --health-startup",
    "health_timeout_seconds": "--health-timeout",
    "stop_timeout_seconds": "--stop-timeout",
    "start_timeout_seconds": "--start-timeout",
    "standby_ready_timeout_seconds": "--standby-timeout",
    "rehearsal_timeout_seconds": "--rehearsal-timeout",
    "application_args": "the application's arguments (after --application and --)",
}


def refusal_text(message: str, settings: str | Sequence[str] | None) -> str:
    """A refusal as the CLI prints it: the operation's message, plus the option of each setting it names."""
    names = (settings,) if isinstance(settings, str) else tuple(settings or ())
    options = [f"{name}: {OPTION_OF_SETTING[name]}" for name in names if name in OPTION_OF_SETTING]
    return f"{message} [{'; '.join(options)}]" if options else message
