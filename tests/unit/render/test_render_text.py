"""Texts the CLI prints (and docs show), byte for byte, now written by the one table writer."""

from __future__ import annotations

from types import SimpleNamespace

from airflow_kafka_stream.ops.results import History, HistoryEntry, SavepointInfo, UnlockResult
from airflow_kafka_stream.render.checkpoint import position_text
from airflow_kafka_stream.render.job import history_text, unlock_text
from airflow_kafka_stream.render.savepoints import prune_text, savepoint_table


def _savepoint(sp_id: str, created: str, batch: int, version: str | None, provider: str | None,
               live: bool = False) -> SavepointInfo:
    return SavepointInfo(id=sp_id, created_at=created, batch_id=batch, query_id=None, offsets=None, sources={},
                         app_version=version, spark_version=None, stateful=provider is not None,
                         state_store_provider=provider, files=3, live=live)


def test_savepoint_list():
    rows = [_savepoint("sp-20261122T101500Z-b42", "2026-11-22T10:15:00.123456+00:00", 42, "1.2.3",
                       "org.x.RocksDBStateStoreProvider", live=True),
            _savepoint("sp-20261122T101500Z-b4-2", "2026-11-22T10:15:00+00:00", 4, None, None)]
    assert savepoint_table(rows) == (
        "ID                                 CREATED                     BATCH TAKEN   APP VERSION    STATE\n"
        "sp-20261122T101500Z-b42            2026-11-22T10:15:00.12345      42 live    1.2.3          "
        "RocksDBStateStoreProvider\n"
        "sp-20261122T101500Z-b4-2           2026-11-22T10:15:00+00:00       4 stopped None           -")
    assert savepoint_table([]) == "(no savepoints)"


def _position(sources: list, kafka: dict) -> SimpleNamespace:
    d = {"checkpoint": "/c", "query_id": "q", "batch_id": 3, "batch_time": None, "batch_watermark_ms": 0,
         "stateful": False, "state_store_provider": None, "in_flight": None, "interrupted_append": None,
         "sources": sources, "kafka_sources": kafka}
    return SimpleNamespace(offsets={}, to_dict=lambda: d)


HEAD = "checkpoint      /c\nquery id        q\nlast committed  batch 3\nwatermark       0\nstate           stateless\n\n"


def test_position_of_one_source_as_docs_checkpoint_md_shows_it():
    text = position_text(_position([{}], {"0": {"orders": {"0": 5, "1": 17}}}))  # type: ignore[arg-type]
    assert text == HEAD + (
        "TOPIC                          PARTITION  NEXT OFFSET\n"
        "orders                                 0            5\n"
        "orders                                 1           17")


def test_position_of_several_sources_names_each():
    text = position_text(_position([{}, {}, {}], {"1": {"t": {"0": 1}}}))  # type: ignore[arg-type]
    assert text == HEAD + (
        "SOURCE  TOPIC                          PARTITION  NEXT OFFSET\n"
        "1       t                                      0            1\n"
        "source(s) 0, 2 are not Kafka sources; resets carry them unchanged")


def test_history_and_unlock():
    records = ({"started_at": "2026-01-01T00:00:00", "operation": "reset", "result": "refused", "by": "me",
                "error": "job runs"}, {"operation": "stop", "result": "ok"})
    found = History("/jobs/a", tuple(HistoryEntry.of(r) for r in records))
    assert found.records() == list(records)
    assert history_text(found) == ("2026-01-01T00:00:00  reset              refused  me  job runs\n"
                                   "?  stop               ok       ")
    assert history_text(History("/jobs/a", ())) == "(no operations recorded)"
    assert unlock_text(UnlockResult("/jobs/a", {"holder": "x"})) == "released lock {'holder': 'x'}"
    assert unlock_text(UnlockResult("/jobs/a", None)) == "the job home was not locked"
    assert UnlockResult("/jobs/a", None).to_dict() == {"released": None}


def test_prune():
    from airflow_kafka_stream.ops.results import PruneResult

    assert prune_text(PruneResult(["a", "b"], ["c"])) == "deleted a, b (kept while an upgrade may roll back to them: c)"
    assert prune_text(PruneResult([], [])) == "nothing to prune"
