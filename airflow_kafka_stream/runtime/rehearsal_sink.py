"""What a rehearsal learns of the new version's writer before it runs its query: the sink's format and output mode
(read from the JVM object), and whether that sink can be opened at all (a format that is not installed fails the
rehearsal at once, before any state is loaded)."""

from __future__ import annotations

import logging

from airflow_kafka_stream.core.rehearsal import spark_error_line

log = logging.getLogger(__name__)


#: Sinks that need no lookup: they are part of Spark, or the job's own code (which the rehearsal runs).
BUILT_IN_SINKS = ("foreachBatch", "foreach", "noop", "memory", "console")


def writer_facts(writer) -> dict[str, str]:
    """The sink format and output mode a DataStreamWriter was given (read from the JVM object; empty when it
    cannot be read, e.g. under Spark Connect)."""
    found: dict[str, str] = {}
    try:
        jwrite = writer._jwrite
        for name, key in (("source", "source"), ("outputMode", "output_mode")):
            field = jwrite.getClass().getDeclaredField(name)
            field.setAccessible(True)
            value = field.get(jwrite)
            if value is not None:
                found[key] = str(value.toString()) if key == "output_mode" else str(value)
    except Exception as exc:  # noqa: BLE001 - only a better rehearsal depends on it
        log.warning("could not read the writer's sink and output mode (the rehearsal checks less): %s", exc)
    if "output_mode" in found:
        found["output_mode"] = found["output_mode"].lower()
    return found


def sink_refusal(spark, source: str | None) -> str | None:
    """Why the writer's sink cannot be opened (its format is not installed), None when it can or is the job's
    own code."""
    if not source or source in BUILT_IN_SINKS:
        return None
    try:
        spark._jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            source, spark._jsparkSession.sessionState().conf())
    except Exception as exc:  # noqa: BLE001 - the verdict
        return f"the new version's sink (format {source!r}) cannot be opened: {spark_error_line(str(exc))}"
    return None
