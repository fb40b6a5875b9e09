"""What the stream runtime costs: group commits, status file and stop checks against the bare query.

The same query (``kafka_stream`` source, noop sink, availableNow, maxOffsetsPerTrigger
chosen for ~60 batches) reads the same topic twice per round: bare, and under
:class:`StreamRuntime`. Rounds alternate which of the two runs first, so drift on a shared
machine hits all; each round's runs are set against that round's bare run and the median round is
printed (run-to-run noise here is about ±0.5 s of 7-10 s, more than the runtime's cost, so nine rounds after two
warm-ups of each kind). Prints ``runtime_overhead: <fraction>``
(time with the runtime / time bare - 1), and ``runtime_overhead_with_metrics``: the same runtime run with
the OpenTelemetry export on (OTLP/HTTP every second to a receiver in a process of its own,
``tests/otlp_receiver.py``: in the driver's process its decoding would take the driver's interpreter lock)
and the time lag measured (which the runtime always does), against the same bare runs.

A streaming job pays the runtime's cost on every batch and its start and end once. ``runtime_overhead_per_batch``
and ``runtime_overhead_per_batch_with_metrics`` set the batches' span (from the first batch's trigger to the end of
the last one's, from Spark's own progress reports) against the bare query's; ``runtime_fixed_seconds`` is what the
runtime adds once, outside that span (taking the job, its first status, the final commit and status, closing its
Kafka clients): the whole-run figures above are the two together, over a run of ~60 batches.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from smoke import count

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RECORDS = count("BENCH_RUNTIME_RECORDS", 300_000, 2_000)
PARTITIONS = 4
BATCHES = count(None, 60, 4)
ROUNDS = count("BENCH_RUNTIME_ROUNDS", 9, 1)
#: Warm-up runs of each kind, interleaved, before the rounds: a JVM's runs kept getting faster over the first
#: six or so (12.3 s, then 10.4, then 9.8 for the same bare query on 2026-11-29), which a round's order then decided.
WARM_UPS = count("BENCH_RUNTIME_WARM_UPS", 2, 0)
#: The export interval of the run with metrics: far more often than the SDK's 60 s, so the run pays for ~20 exports.
EXPORT_INTERVAL_MS = "1000"


def fill_topic(bootstrap: str, topic: str) -> None:
    """Produce in big batches, as a busy producer writes a topic."""
    from confluent_kafka import Producer

    from tests.kafka_utils import create_topic

    create_topic(bootstrap, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000})
    value = b'{"id":"x","key":"k","ts":"2024-01-01T00:00:00Z","amount":1.0}'
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


class Run(float):
    """A run's wall time (the float), with the span of its batches (``span``)."""

    span: float

    @classmethod
    def of(cls, elapsed: float, query) -> Run:
        found = cls(elapsed)
        found.span = batch_span(query)
        return found


def batch_span(query) -> float:
    """Seconds from the first data batch's trigger to the end of the last one's (Spark's progress reports)."""
    from datetime import datetime

    batches = [p for p in query.recentProgress if (p["numInputRows"] or 0) > 0]
    if len(batches) < 2:
        raise SystemExit(f"only {len(batches)} progress reports kept: raise spark.sql.streaming.numRecentProgressUpdates")

    def start(progress) -> float:
        return datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()

    last = batches[-1]
    return start(last) + last["durationMs"]["triggerExecution"] / 1000 - start(batches[0])


def bare_run(spark, bootstrap: str, topic: str, per_trigger: int, workdir: str) -> float:
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest",
               "maxOffsetsPerTrigger": str(per_trigger)}
    began = time.perf_counter()
    query = (spark.readStream.format("kafka_stream").options(**options).load()
             .writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", f"{workdir}/checkpoint").start())
    query.awaitTermination()
    elapsed = time.perf_counter() - began
    batches = (query.lastProgress or {}).get("batchId")
    found = Run.of(elapsed, query)
    print(f"# bare: {elapsed:.2f}s, batches {found.span:.2f}s, last batch {batches}", file=sys.stderr)
    return found


def runtime_run(spark, bootstrap: str, topic: str, per_trigger: int, workdir: str) -> float:
    from airflow_kafka_stream.runtime import StreamConfig, StreamRuntime

    config = StreamConfig(job_name="bench", bootstrap_servers=bootstrap, group_id=f"bench-{os.path.basename(workdir)}",
                          topics=[topic], starting_offsets="earliest", max_offsets_per_trigger=per_trigger)
    began = time.perf_counter()
    runtime = StreamRuntime(spark, f"{workdir}/home", config)
    writer = runtime.read_stream().writeStream.format("noop").trigger(availableNow=True)
    result = runtime.run(writer)
    elapsed = time.perf_counter() - began
    if result.exit_code != 0 or result.records != RECORDS:
        raise SystemExit(f"runtime run ended {result.summary()}")
    found = Run.of(elapsed, runtime.run_state.query)
    print(f"# runtime: {elapsed:.2f}s, batches {found.span:.2f}s, {result.batches} batches, "
          f"{runtime.committer.successes} group commits", file=sys.stderr)
    return found


@contextmanager
def metrics_on(endpoint: str):
    """OpenTelemetry's own variables for the runtime's export, set for one run."""
    saved = {name: os.environ.get(name) for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_METRIC_EXPORT_INTERVAL")}
    os.environ.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_METRIC_EXPORT_INTERVAL=EXPORT_INTERVAL_MS)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def per_round(times: list[float], bare: list[float]) -> float:
    """The median over the rounds of (this kind's time / the bare time of the same round) - 1."""
    import statistics

    return statistics.median(run / base for run, base in zip(times, bare, strict=True)) - 1


def spans(runs: list[Run]) -> list[float]:
    return [run.span for run in runs]


def fixed_seconds(runs: list[Run], bare: list[Run]) -> float:
    """The median over the rounds of what the run adds outside its batches' span, over the bare run's."""
    import statistics

    return statistics.median((run - run.span) - (base - base.span) for run, base in zip(runs, bare, strict=True))


def main() -> int:
    logging.basicConfig(level=logging.WARNING)
    from airflow_kafka_stream.devstack.broker import existing_or_local_broker

    bootstrap, broker = existing_or_local_broker()
    from airflow_kafka_stream.runtime.session import local_session
    from tests.kafka_utils import unique

    spark = None
    receiver = subprocess.Popen([sys.executable, "-m", "tests.otlp_receiver"], cwd=ROOT, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    endpoint = f"http://127.0.0.1:{receiver.stdout.readline().strip()}"
    try:
        topic = unique("bench-runtime")
        fill_topic(bootstrap, topic)
        # Every batch's progress kept (Spark keeps 100), for the batches' span.
        spark = local_session("bench-runtime", cores="2",
                              extra={"spark.sql.streaming.numRecentProgressUpdates": str(BATCHES * 2 + 10)})
        per_trigger = RECORDS // BATCHES
        with tempfile.TemporaryDirectory(prefix="bench-runtime-") as tmp:
            bare: list[Run] = []
            managed: list[Run] = []
            measured: list[Run] = []

            def with_metrics(*args) -> float:
                with metrics_on(endpoint):
                    return runtime_run(*args)

            # One warm-up of each kind, not only of the bare query: a kind's first runs in a JVM are slower (2 s
            # of 7 here), and a kind without its warm-up would pay for it in the rounds.
            for warm_up in range(WARM_UPS):
                for run, kind in ((bare_run, "bare"), (runtime_run, "runtime"), (with_metrics, "metrics")):
                    run(spark, bootstrap, topic, per_trigger, f"{tmp}/warmup{warm_up}-{kind}")

            for number in range(ROUNDS):
                # Which kind runs first alternates too: later runs in a JVM drift, and the order must not decide.
                runs = [(bare, bare_run, "bare"), (managed, runtime_run, "runtime"),
                        (measured, with_metrics, "metrics")]
                for times, run, kind in runs if number % 2 == 0 else reversed(runs):
                    times.append(run(spark, bootstrap, topic, per_trigger, f"{tmp}/{kind}{number}"))
        exports = int(receiver.communicate("", timeout=30)[0].strip() or 0)
        if not exports:
            raise SystemExit("the runs with metrics exported nothing")
        print(f"# {exports} exports received", file=sys.stderr)
        # Each round's runs against that round's bare run, then the median round: drift over the rounds (a JVM
        # warming, a neighbour's load) hits a round's runs alike, and one slow run does not decide.
        print(f"runtime_overhead: {per_round(managed, bare):.4f}", flush=True)
        print(f"runtime_overhead_with_metrics: {per_round(measured, bare):.4f}", flush=True)
        print(f"runtime_overhead_per_batch: {per_round(spans(managed), spans(bare)):.4f}", flush=True)
        print(f"runtime_overhead_per_batch_with_metrics: {per_round(spans(measured), spans(bare)):.4f}", flush=True)
        print(f"runtime_fixed_seconds: {fixed_seconds(managed, bare):.2f}", flush=True)
        return 0
    finally:
        if receiver.poll() is None:
            receiver.kill()
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
