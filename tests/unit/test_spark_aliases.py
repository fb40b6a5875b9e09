"""Jobs written against the old ``airflow_kafka_stream.spark`` paths still import, with a DeprecationWarning
that names the new module; the names they get are the new modules' own."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize(("old", "new", "names"), [
    ("airflow_kafka_stream.spark.runtime", "airflow_kafka_stream.runtime",
     ("StreamConfig", "StreamRuntime", "RunResult", "run_stream")),
    ("airflow_kafka_stream.spark.source", "airflow_kafka_stream.source.source",
     ("register", "KafkaStreamDataSource", "source_schema")),
    ("airflow_kafka_stream.spark.dead_letter", "airflow_kafka_stream.runtime.dead_letter",
     ("DeadLetterSink", "parse_json_values", "split_dead_letters")),
])
def test_old_paths_warn_and_reexport(old, new, names):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    current = importlib.import_module(new)
    for name in names:
        assert getattr(module, name) is getattr(current, name)
