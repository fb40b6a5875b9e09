"""Once per complete hour of the streaming job's output: a summary of that hour's events (docs/assets.md).

The job announces each hour of event time its watermark has completed as an event of its output asset, with
the hour as the event's partition key (``stream_submit`` with ``output_asset``). This DAG is scheduled on that
asset, partition by partition: one run per complete hour, none for an hour still filling. Its task reads the
example pipeline's events of that hour from the output (file URIs) and writes
``<output>/hourly/<hour>.json``: the events (distinct ids, so a replay after a reset counts once) and the amount.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from airflow.sdk import DAG, Asset, PartitionedAssetTimetable, StartOfHourMapper, task

from airflow_kafka_stream import params

OUTPUT = Asset(params.output_asset_uri())

with DAG(
    dag_id="stream_output_hourly",
    schedule=PartitionedAssetTimetable(assets=OUTPUT, default_partition_mapper=StartOfHourMapper()),
    catchup=False,
    tags=["airflow-kafka-stream"],
) as dag:

    @task
    def summarize_hour(dag_run=None) -> dict:
        """Count the hour's events in the job's output and write the summary beside it."""
        import pyarrow.compute as pc
        import pyarrow.dataset as ds

        start = datetime.strptime(dag_run.partition_key, "%Y-%m-%dT%H").replace(tzinfo=UTC)
        output = Path(urlsplit(OUTPUT.uri).path)
        events = ds.dataset(output / "events", format="parquet", partitioning="hive")
        aware = getattr(events.schema.field("ts").type, "tz", None) is not None  # as Spark's settings wrote it
        start_at, end_at = (t if aware else t.replace(tzinfo=None) for t in (start, start + timedelta(hours=1)))
        table = events.to_table(columns=["id", "amount", "ts"],
                                filter=(ds.field("ts") >= start_at) & (ds.field("ts") < end_at))
        distinct = table.group_by("id").aggregate([("amount", "max")])
        summary = {"hour": start.isoformat(), "events": distinct.num_rows,
                   "amount": pc.sum(distinct["amount_max"]).as_py() or 0.0,
                   "partition_key": dag_run.partition_key}
        (output / "hourly").mkdir(parents=True, exist_ok=True)
        (output / "hourly" / f"{dag_run.partition_key}.json").write_text(json.dumps(summary) + "\n")
        return summary

    summarize_hour()
