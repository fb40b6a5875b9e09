"""Which event-time windows a watermark completes, and how they are named to Airflow."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kafka_stream.core.asset_windows import (
    MAX_WINDOWS_AT_ONCE,
    announced_through,
    complete_windows,
    output_asset,
    partition_key,
    window_start,
)
from airflow_kafka_stream.errors import InvalidInputError

HOUR = timedelta(hours=1)


def at(hour: int, minute: int = 0, day: int = 30) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def test_windows_start_at_the_first_events_hour_and_end_at_the_watermark():
    done = complete_windows(HOUR, at(8, 40), first_event=at(6, 17), announced_through=None)
    assert done.starts == [at(6), at(7)] and done.skipped == 0


def test_a_window_the_watermark_just_reaches_is_complete_and_one_it_is_inside_is_not():
    assert complete_windows(HOUR, at(8), first_event=at(7), announced_through=None).starts == [at(7)]
    assert complete_windows(HOUR, at(7, 59), first_event=at(7), announced_through=None).starts == []


def test_nothing_announced_is_announced_again_even_when_the_watermark_goes_back():
    assert complete_windows(HOUR, at(9, 5), first_event=at(6), announced_through=at(8)).starts == [at(8)]
    # A reset or restore rewound the stream: its watermark is behind what was announced.
    assert complete_windows(HOUR, at(6, 30), first_event=at(5), announced_through=at(8)).starts == []


def test_a_huge_jump_announces_the_newest_windows_and_says_how_many_it_skipped():
    done = complete_windows(HOUR, at(0, day=30), first_event=datetime(1970, 1, 1, tzinfo=UTC), announced_through=None)
    assert len(done.starts) == MAX_WINDOWS_AT_ONCE and done.starts[-1] == at(23, day=29)
    assert done.skipped == (at(0, day=30) - datetime(1970, 1, 1, tzinfo=UTC)) // HOUR - MAX_WINDOWS_AT_ONCE


def test_windows_are_aligned_to_midnight_utc_in_any_zone():
    from zoneinfo import ZoneInfo

    moment = datetime(2026, 11, 30, 9, 50, tzinfo=ZoneInfo("Asia/Kolkata"))  # 04:20 UTC
    assert window_start(moment, timedelta(minutes=15)) == at(4, 15)
    assert window_start(moment, timedelta(days=1)) == at(0)


def test_the_partition_key_is_what_airflows_hourly_mapper_reads():
    from airflow.partition_mappers.temporal import StartOfHourMapper  # the scheduler's side of the SDK's mapper

    key = partition_key(at(7))
    assert key == "2026-11-30T07:00:00"
    assert StartOfHourMapper().to_downstream(key) == "2026-11-30T07"


@pytest.mark.parametrize(("uri", "every", "named"), [
    ("orders", "PT1H", "output_asset"),
    ("/data/orders", "PT1H", "output_asset"),
    ("file:///data/orders", "1 hour", "asset_every"),
    ("file:///data/orders", "PT7M", "asset_every"),
    ("file:///data/orders", "P2D", "asset_every"),
    ("file:///data/orders", "PT0.5S", "asset_every"),
])
def test_a_bad_asset_or_window_is_refused_naming_the_setting(uri, every, named):
    with pytest.raises(InvalidInputError) as refused:
        output_asset(uri, every)
    assert refused.value.settings == (named,)


def test_no_asset_is_declared_by_an_empty_uri_and_a_good_one_is_kept_as_given():
    assert output_asset("", "PT1H") is None and output_asset(None) is None
    declared = output_asset(" s3://lake/orders ", "PT15M")
    assert (declared.uri, declared.every) == ("s3://lake/orders", timedelta(minutes=15))


def test_the_record_of_another_asset_or_window_is_not_this_ones():
    asset = output_asset("file:///o", "PT1H")
    record = {"uri": "file:///o", "every_seconds": 3600.0, "announced_through": "2026-11-30T08:00:00+00:00"}
    assert announced_through(record, asset) == at(8)
    assert announced_through({**record, "uri": "file:///other"}, asset) is None
    assert announced_through({**record, "every_seconds": 900.0}, asset) is None
    assert announced_through(None, asset) is None


def test_a_rewind_says_which_announced_windows_it_replays_into_and_nothing_without_any():
    from airflow_kafka_stream.core.asset_windows import rewind_note

    note = rewind_note({"uri": "file:///o", "announced_through": "2026-11-30T08:00:00+00:00"})
    assert "file:///o was announced through 2026-11-30T08:00:00+00:00" in note and "not announced again" in note
    assert rewind_note(None) == "" and rewind_note({"uri": "file:///o"}) == ""
