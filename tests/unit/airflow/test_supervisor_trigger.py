"""The supervisor's trigger keeps only serializable arguments and is rebuilt from what it serializes."""

from __future__ import annotations

import importlib
import json
from dataclasses import asdict

from airflow_kafka_stream.core.watchdog import Policy
from airflow_kafka_stream.triggers.supervisor import StreamJobLivenessTrigger


def test_serialize_returns_the_class_path_and_every_argument():
    trigger = StreamJobLivenessTrigger("/jobs/orders", asdict(Policy(max_restarts=2)), "fs_conn", 0.5)
    path, kwargs = trigger.serialize()
    module, name = path.rsplit(".", 1)
    rebuilt = getattr(importlib.import_module(module), name)(**json.loads(json.dumps(kwargs)))
    assert rebuilt.serialize() == (path, kwargs)
    assert set(kwargs) == {"job_home", "policy", "storage_conn_id", "poll_seconds"}
    assert Policy(**kwargs["policy"]) == Policy(max_restarts=2)
