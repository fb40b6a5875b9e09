"""What kind of sink a job writes to, which decides what a reset or restore must keep whole.

Two kinds matter to the control plane:

* ``file``: Spark's file sink (``writeStream.format("parquet"|...).option("path", ...)``).
  It keeps its own batch log, ``<path>/_spark_metadata``: a batch the checkpoint
  appends needs an entry there, and a checkpoint that restarts or rewinds batch
  ids would make the sink skip batches it has logged.
* ``idempotent``: a sink that replaces a batch's output by the batch id (and the
  checkpoint generation), e.g. ``foreachBatch`` writing ``generation=G/batch=B``
  with mode overwrite. It keeps no batch log, so there is nothing to append and
  nothing that skips.
* ``kafka``: the transactional Kafka sink (``runtime/kafka_sink.py``): each batch's records are committed in one
  Kafka transaction with a marker of the batch, so a batch re-run after a crash writes nothing twice. It keeps no
  log a checkpoint must match, but a rewind (a reset, a restore) writes the batches it replays again: the records
  read again are in the output topic twice, unless the job skips replays (``skip_replays``: the sink keeps, in the
  same transactions, how far it wrote each input partition, and drops rows below that). Its path is
  ``kafka://<bootstrap servers>/<topic>``.

job.json records ``"sink": {"kind": ..., "path": ...}`` (and ``"skip_replays": true`` for a Kafka sink that skips
replays). Job homes written
before the kind existed hold only ``"sink_path"``: that meant a file sink, and
still does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kafka_stream.errors import InvalidInputError

FILE = "file"
IDEMPOTENT = "idempotent"
KAFKA = "kafka"
#: A flag value, not a kind: the job has no sink whose log the control plane keeps.
NONE = "none"
KINDS = (FILE, IDEMPOTENT, KAFKA)


@dataclass(frozen=True)
class Sink:
    """A job's sink: its kind and, where known, its output path."""

    kind: str
    path: str | None = None
    #: A Kafka sink that writes no input record's output twice, even when a rewind reads it again.
    skips_replays: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidInputError(f"unknown sink kind {self.kind!r}: use one of {', '.join(KINDS)}",
                                    setting="sink_kind")
        if self.skips_replays and self.kind != KAFKA:
            raise InvalidInputError(f"skip_replays is the Kafka sink's (output_topic); a {self.kind} sink has none",
                                    setting="skip_replays")
        if self.kind == FILE and not self.path:
            raise InvalidInputError("a file sink needs its output path (the directory holding _spark_metadata): "
                                    "give it as sink_path", setting="sink_path")

    @property
    def has_batch_log(self) -> bool:
        """Whether the sink keeps a ``_spark_metadata`` batch log keyed by batch id."""
        return self.kind == FILE

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, **({"skip_replays": True} if self.skips_replays else {})}

    @property
    def writes_replays(self) -> bool:
        """Whether records a rewind reads again reach the output again (an appending sink that does not skip)."""
        return self.kind == KAFKA and not self.skips_replays

    def describe(self) -> str:
        where = f" at {self.path}" if self.path else ""
        if self.has_batch_log:
            return f"file sink{where} (batch log _spark_metadata kept whole)"
        if self.kind == KAFKA and self.skips_replays:
            return (f"transactional Kafka sink{where}: each batch committed once with its marker; records a rewind "
                    "reads again are skipped (skip_replays): the topic holds each once")
        if self.kind == KAFKA:
            return (f"transactional Kafka sink{where}: each batch committed once with its marker; batches a rewind "
                    "replays are written to the topic again")
        return (f"idempotent sink{where}: no batch log to keep; assumed to replace a batch's output by checkpoint "
                "generation and batch id")


def sink_from_spec(spec: Mapping[str, Any]) -> Sink | None:
    """The sink job.json records: ``sink`` (kind and path), else a legacy ``sink_path`` (a file sink), else None."""
    recorded = spec.get("sink")
    if isinstance(recorded, Mapping):
        kind = recorded.get("kind")
        if kind in (None, NONE):
            return None
        try:
            return Sink(str(kind), recorded.get("path") or None, bool(recorded.get("skip_replays")))
        except InvalidInputError as exc:
            raise InvalidInputError(f"job.json's sink {dict(recorded)} is invalid: {exc}; fix job.json or restart "
                                    "the job so it records its sink again") from exc
    if recorded is not None:
        raise InvalidInputError(f"job.json's sink must be an object with kind and path, got {recorded!r}")
    legacy = spec.get("sink_path")
    return Sink(FILE, str(legacy)) if legacy else None


def resolve_sink(recorded: Sink | None, kind: str | None = None, path: str | None = None) -> Sink | None:
    """The sink an operation checks: explicit ``kind``/``path`` (the settings sink_kind, sink_path) over job.json's.

    ``kind`` None and ``path`` None keep the recorded sink. A path alone names a
    file sink (the meaning a lone ``sink_path`` always had). ``kind`` ``none`` says
    the job keeps no sink log. An empty path is refused rather than read as
    "use the recorded one", which would be the opposite of what it says.
    """
    if path is not None and not path.strip():
        raise InvalidInputError(
            "sink_path is empty; to say the job has no file sink set sink_kind to idempotent (foreachBatch output "
            "replaced per batch id) or none, else give the file sink's output directory", setting="sink_path"
        )
    if kind is None:
        return recorded if path is None else Sink(FILE, path)
    if kind == NONE:
        if path is not None:
            raise InvalidInputError("sink_kind none contradicts sink_path: give one of them", setting="sink_kind")
        return None
    if kind not in KINDS:
        raise InvalidInputError(f"unknown sink_kind {kind!r}: use {', '.join(KINDS)} or {NONE}",
                                setting="sink_kind")
    if path is None and recorded is not None:
        path = recorded.path
    same = recorded is not None and recorded.kind == kind
    return Sink(kind, path, same and recorded.skips_replays)
