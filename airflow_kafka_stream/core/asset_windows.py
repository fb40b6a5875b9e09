"""Which event-time windows of a job's output are complete, to announce each once as an Airflow asset event.

A job declares its output as an asset (a URI such as ``file:///lake/orders``) and a window length (``PT1H``).
Spark's event-time watermark says how far the output is complete: once a batch that ran with watermark ``W``
has committed, every record with an event time before ``W`` that the query will ever write is in the output
(a later one is late by the query's own definition). Each window ``[start, start + every)`` that ends at or
before ``W`` is then complete and is announced once, with the window's start as the asset event's partition
key, so a downstream DAG scheduled on the asset with a ``PartitionedAssetTimetable`` runs once per window.

What was announced is kept in the job home (``control/assets.json``) and only ever moves forward: a reset or
a restore that rewinds the stream replays records into windows already announced, and those windows are not
announced again (docs/assets.md says what that means for a downstream DAG).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from airflow_kafka_stream.core.durations import parse_duration
from airflow_kafka_stream.errors import InvalidInputError

#: The asset event's partition key: the window's start in UTC, in the form Airflow's temporal partition mappers
#: read by default (``StartOfHourMapper()`` etc. take ``%Y-%m-%dT%H:%M:%S``).
PARTITION_KEY_FORMAT = "%Y-%m-%dT%H:%M:%S"
#: Windows one watermark step may complete at most. A first batch whose oldest record is years old (a wrong
#: clock, a replayed archive) would otherwise queue hundreds of thousands of events: the older ones are then
#: skipped, and the skip is reported.
MAX_WINDOWS_AT_ONCE = 1000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class OutputAsset:
    """What a job's output means to Airflow: the asset's URI and the event-time window each event announces."""

    uri: str
    every: timedelta

    def describe(self) -> dict[str, Any]:
        return {"uri": self.uri, "every_seconds": self.every.total_seconds()}


def output_asset(uri: str | None, every: str = "PT1H", *, uri_setting: str = "output_asset",
                 every_setting: str = "asset_every") -> OutputAsset | None:
    """The declared output asset (None when ``uri`` is empty), checked: a URI with a scheme, as Airflow wants
    an asset's, and a window of whole seconds between a second and a day that divides a day evenly (so windows
    start at the same times every day)."""
    if not uri or not str(uri).strip():
        return None
    text = str(uri).strip()
    if not urlsplit(text).scheme or "://" not in text:
        raise InvalidInputError(f"output asset {text!r} is not a URI: give it a scheme, as the asset is named in "
                                "the downstream DAG, e.g. file:///lake/orders, s3://bucket/orders or "
                                "kafka://broker:9092/orders-out", setting=uri_setting)
    return OutputAsset(text, asset_window(every, every_setting))


def asset_window(every: str, setting: str = "asset_every") -> timedelta:
    """The window length ``every`` (ISO 8601), refused unless whole seconds that divide a day evenly."""
    window = parse_duration(every, setting)
    seconds = window.total_seconds()
    if seconds < 1 or seconds != int(seconds) or seconds > 86400 or 86400 % int(seconds):
        raise InvalidInputError(f"asset window {every!r} must be whole seconds, at most a day and divide a day "
                                "evenly (PT15M, PT1H, PT6H, P1D)", setting=setting)
    return window


def window_start(moment: datetime, every: timedelta) -> datetime:
    """The start of the window ``moment`` falls in (windows are aligned to midnight UTC)."""
    step = int(every.total_seconds())
    elapsed = int((moment.astimezone(UTC) - _EPOCH).total_seconds() // 1)
    return _EPOCH + timedelta(seconds=elapsed - elapsed % step)


@dataclass(frozen=True)
class Completion:
    """The windows a watermark completes: their starts, oldest first, and how many older ones were skipped."""

    starts: list[datetime]
    skipped: int = 0


def complete_windows(every: timedelta, watermark: datetime, *, first_event: datetime,
                     announced_through: datetime | None) -> Completion:
    """The windows that end at or before ``watermark`` and were not announced yet.

    The first window is the one holding the job's first event (``first_event``, the oldest event time of the first
    batch that had any) or, once something was announced, the one starting at ``announced_through`` (the end of
    the newest announced window): nothing before either is announced.
    """
    start = announced_through if announced_through is not None else window_start(first_event, every)
    ends_by = window_start(watermark, every)  # the last complete window ends here
    count = int((ends_by - start) / every) if ends_by > start else 0
    skipped = max(0, count - MAX_WINDOWS_AT_ONCE)
    return Completion([start + every * index for index in range(skipped, count)], skipped)


def partition_key(start: datetime) -> str:
    return start.astimezone(UTC).strftime(PARTITION_KEY_FORMAT)


def event_extra(asset: OutputAsset, start: datetime, *, job: str, watermark: datetime, batch_id: int,
                generation: int | None) -> dict[str, Any]:
    """The asset event's ``extra``: the window, and where the job was when it was complete."""
    return {"job": job, "window_start": start.isoformat(), "window_end": (start + asset.every).isoformat(),
            "watermark": watermark.isoformat(), "batch_id": batch_id, "generation": generation}


def rewind_note(state: Mapping[str, Any] | None) -> str:
    """What a reset or restore that rewinds the stream means for the output asset's announced windows (empty when
    the job announced none): they are not announced again, so their downstream runs do not see the replay."""
    through = (state or {}).get("announced_through")
    if not through:
        return ""
    return (f"; output asset {state.get('uri')} was announced through {through}: records replayed into windows before "
            "that are not announced again, so the downstream runs of those windows do not run again (clear them to "
            "recompute; docs/assets.md)")


def parse_time(text: Any) -> datetime | None:
    """An ISO time of the state document or of Spark's progress (``2026-12-04T09:00:00.000Z``), UTC."""
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def announced_through(state: Mapping[str, Any] | None, asset: OutputAsset) -> datetime | None:
    """The end of the newest announced window of ``asset`` recorded in ``state`` (None when nothing was, or the
    record is of another asset or window: then announcing starts again from the job's next events)."""
    if not state or state.get("uri") != asset.uri or state.get("every_seconds") != asset.every.total_seconds():
        return None
    return parse_time(state.get("announced_through"))
