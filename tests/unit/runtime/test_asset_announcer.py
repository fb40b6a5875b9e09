"""The driver's announcer of complete windows: once each, oldest first, never the query's wait, never twice.

Airflow's API is a stand-in here (what was posted is recorded); the real API is exercised by the stack test
(tests/integration/airflow/test_airflow_stack.py, the downstream DAG)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from airflow_kafka_stream.core.asset_windows import output_asset
from airflow_kafka_stream.runtime.airflow_api import AirflowApiError
from airflow_kafka_stream.runtime.asset_announcer import NO_API, AssetAnnouncer
from airflow_kafka_stream.runtime.progress import BatchProgress
from airflow_kafka_stream.storage.jobhome import JobHome

ASSET = output_asset("file:///lake/orders", "PT1H")


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, 30, hour, minute, tzinfo=UTC)


class StandInApi:
    """Records the events posted; ``failing`` makes every post fail as an unreachable API would."""

    def __init__(self, known: bool = True, posted_before: set[str] | None = None) -> None:
        self.known, self.posted_before = known, set(posted_before or ())
        self.events: list[tuple[int, str, dict]] = []
        self.failing = False

    def asset_id(self, uri: str) -> int | None:
        return 7 if self.known and uri == ASSET.uri else None

    def recent_partition_keys(self, asset_id: int) -> set[str]:
        return self.posted_before | {key for _id, key, _extra in self.events}

    def create_event(self, asset_id: int, key: str, extra: dict) -> dict:
        if self.failing:
            raise AirflowApiError("POST /api/v2/assets/events: Airflow's API cannot be reached (refused)")
        self.events.append((asset_id, key, extra))
        return {}


def batch(batch_id: int, watermark: datetime | None, first: datetime | None = None) -> BatchProgress:
    return BatchProgress(id="q", batchId=batch_id, numInputRows=1, durationMs={}, end_offsets={},
                         watermark=watermark, event_time_min=first)


def eventually(check, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


@pytest.fixture
def home(tmp_path) -> JobHome:
    return JobHome(str(tmp_path / "home"))


def test_each_complete_window_is_announced_once_oldest_first_with_its_position(home):
    api = StandInApi()
    announcer = AssetAnnouncer(ASSET, home, "orders", api)
    announcer.batch_committed(batch(0, None, first=at(6, 17)), generation=1)
    announcer.batch_committed(batch(1, at(6, 45)), generation=1)
    announcer.batch_committed(batch(2, at(8, 40)), generation=1)
    eventually(lambda: len(api.events) == 2)
    announcer.batch_committed(batch(3, at(8, 50)), generation=1)  # completes nothing new
    assert announcer.close(5)
    assert [key for _id, key, _extra in api.events] == ["2026-11-30T06:00:00", "2026-11-30T07:00:00"]
    extra = api.events[1][2]
    assert extra == {"job": "orders", "window_start": at(7).isoformat(), "window_end": at(8).isoformat(),
                     "watermark": at(8, 40).isoformat(), "batch_id": 2, "generation": 1}
    assert home.announced_assets()["announced_through"] == at(8).isoformat()
    assert announcer.document()["announced_this_run"] == 2 and announcer.document()["error"] is None


def test_a_rewound_stream_announces_nothing_again_and_goes_on_past_what_was_announced(home):
    first = StandInApi()
    earlier = AssetAnnouncer(ASSET, home, "orders", first)
    earlier.batch_committed(batch(0, at(8, 5), first=at(6)), generation=1)
    eventually(lambda: len(first.events) == 2)
    earlier.close(5)

    api = StandInApi()
    after_reset = AssetAnnouncer(ASSET, home, "orders", api)  # a new generation replays from 05:00
    after_reset.batch_committed(batch(0, None, first=at(5)), generation=2)
    after_reset.batch_committed(batch(1, at(7, 30)), generation=2)
    time.sleep(0.3)
    assert api.events == []
    after_reset.batch_committed(batch(2, at(9, 10)), generation=2)
    eventually(lambda: len(api.events) == 1)
    after_reset.close(5)
    assert api.events[0][1] == "2026-11-30T08:00:00"


def test_a_window_posted_just_before_a_crash_is_not_posted_again(home):
    home.write_announced_assets({**ASSET.describe(), "first_event_time": at(6).isoformat(),
                                 "announced_through": at(7).isoformat(), "posting": "2026-11-30T07:00:00"})
    api = StandInApi(posted_before={"2026-11-30T07:00:00"})
    announcer = AssetAnnouncer(ASSET, home, "orders", api)
    announcer.batch_committed(batch(5, at(9)), generation=1)
    eventually(lambda: home.announced_assets().get("announced_through") == at(9).isoformat())
    announcer.close(5)
    assert [key for _id, key, _extra in api.events] == ["2026-11-30T08:00:00"]
    assert "posting" not in home.announced_assets()


def test_a_window_whose_post_did_not_reach_airflow_before_a_crash_is_posted(home):
    home.write_announced_assets({**ASSET.describe(), "first_event_time": at(6).isoformat(),
                                 "announced_through": at(7).isoformat(), "posting": "2026-11-30T07:00:00"})
    api = StandInApi()
    announcer = AssetAnnouncer(ASSET, home, "orders", api)
    announcer.batch_committed(batch(5, at(8, 30)), generation=1)
    eventually(lambda: len(api.events) == 1)
    announcer.close(5)
    assert api.events[0][1] == "2026-11-30T07:00:00"


def test_an_unreachable_api_is_retried_and_shown_and_never_waited_for(home):
    api = StandInApi()
    api.failing = True
    announcer = AssetAnnouncer(ASSET, home, "orders", api, retry_seconds=0.2)
    started = time.monotonic()
    announcer.batch_committed(batch(0, at(7, 30), first=at(6)), generation=1)
    assert time.monotonic() - started < 0.5, "the batch waited for Airflow"
    eventually(lambda: announcer.document()["error"] is not None)
    assert "cannot be reached" in announcer.document()["error"]
    assert announcer.document()["waiting"] == 1
    api.failing = False  # the API is back: the retry announces without a new batch
    eventually(lambda: len(api.events) == 1)
    eventually(lambda: announcer.document()["error"] is None)
    announcer.close(5)


def test_without_an_api_the_windows_wait_and_the_status_says_why(home):
    announcer = AssetAnnouncer(ASSET, home, "orders", None)
    announcer.batch_committed(batch(0, at(9), first=at(6)), generation=1)
    eventually(lambda: announcer.document()["waiting"] == 3)
    announcer.close(5)
    assert announcer.document()["error"] == NO_API
    assert home.announced_assets() is None


def test_an_asset_no_dag_declares_is_reported_and_nothing_is_recorded_as_announced(home):
    api = StandInApi(known=False)
    announcer = AssetAnnouncer(ASSET, home, "orders", api, retry_seconds=60)
    announcer.batch_committed(batch(0, at(8), first=at(6)), generation=1)
    eventually(lambda: announcer.document()["error"] is not None)
    announcer.close(5)
    assert "a DAG must declare it" in announcer.document()["error"]
    assert (home.announced_assets() or {}).get("announced_through") is None


def test_a_record_of_another_asset_starts_again_from_this_drivers_events(home):
    home.write_announced_assets({"uri": "file:///lake/old", "every_seconds": 3600.0,
                                 "first_event_time": at(1).isoformat(), "announced_through": at(9).isoformat()})
    api = StandInApi()
    announcer = AssetAnnouncer(ASSET, home, "orders", api)
    announcer.batch_committed(batch(0, at(7, 10), first=at(6, 30)), generation=1)
    eventually(lambda: len(api.events) == 1)
    announcer.close(5)
    assert api.events[0][1] == "2026-11-30T06:00:00"
    assert home.announced_assets()["uri"] == ASSET.uri


def test_the_batch_that_completes_a_window_is_announced_even_when_the_driver_stops_right_after(home):
    api = StandInApi()
    announcer = AssetAnnouncer(ASSET, home, "orders", api)
    announcer.batch_committed(batch(0, at(8), first=at(7)), generation=1)
    assert announcer.close(5)
    assert [key for _id, key, _extra in api.events] == ["2026-11-30T07:00:00"]

