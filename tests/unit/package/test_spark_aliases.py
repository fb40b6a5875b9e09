"""Jobs written against the old ``airflow_kafka_stream.spark`` paths still import, with a DeprecationWarning
that names the new module; the names they get are the new modules' own.

Every module the old package had (before its split into source/ and runtime/, commit aeda1d6) is imported,
and every public name it had is checked, read from that commit when the repository's history is at hand."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SPLIT = "aeda1d6"

#: The old package's modules and where each now lives (the module the warning names).
OLD_MODULES = {
    "arrow_rows": "airflow_kafka_stream.source.arrow_rows",
    "consumer_cache": "airflow_kafka_stream.source.consumer_cache",
    "dead_letter": "airflow_kafka_stream.runtime.dead_letter",
    "driver_consumers": "airflow_kafka_stream.source.driver_consumers",
    "driver_reader": "airflow_kafka_stream.source.driver_reader",
    "group_committer": "airflow_kafka_stream.runtime.group_committer",
    "lag_sampler": "airflow_kafka_stream.runtime.lag_sampler",
    "native_reader": "airflow_kafka_stream.source.native_reader",
    "offset_ranges": "airflow_kafka_stream.source.offset_ranges",
    "offsets_text": "airflow_kafka_stream.source.offsets_text",
    "partition_polls": "airflow_kafka_stream.source.partition_polls",
    "read_placement": "airflow_kafka_stream.source.read_placement",
    "runtime": "airflow_kafka_stream.runtime",
    "session": "airflow_kafka_stream.runtime.session",
    "source": "airflow_kafka_stream.source.source",
    "source_options": "airflow_kafka_stream.source.source_options",
    "standby": "airflow_kafka_stream.runtime.standby",
}

#: What jobs and the example pipeline imported, checked even without the repository's history.
USED_BY_JOBS = {
    "session": ("local_session", "executor_count"),
    "runtime": ("StreamConfig", "StreamRuntime", "RunResult", "run_stream", "checkpoint_position"),
    "source": ("register", "KafkaStreamDataSource", "source_schema"),
    "dead_letter": ("DeadLetterSink", "parse_json_values", "split_dead_letters"),
    "source_options": ("parse_source_options", "START_EARLIEST"),
}


def import_fresh(old: str):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    return module, [str(w.message) for w in seen if issubclass(w.category, DeprecationWarning)]


def old_public_names(name: str) -> list[str] | None:
    """The public top-level names of the old module, from the commit before the split; None without history."""
    try:
        text = subprocess.run(["git", "show", f"{SPLIT}^:airflow_kafka_stream/spark/{name}.py"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    names = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [n for n in names if not n.startswith("_") and n != "log"]


@pytest.mark.parametrize("name", sorted(OLD_MODULES))
def test_every_old_module_imports_warns_with_its_new_path_and_keeps_its_names(name: str) -> None:
    old = f"airflow_kafka_stream.spark.{name}"
    module, warned = import_fresh(old)
    assert any(old in text and OLD_MODULES[name] in text for text in warned), warned
    names = set(USED_BY_JOBS.get(name, ())) | set(old_public_names(name) or ())
    missing = sorted(n for n in names if not hasattr(module, n))
    assert not missing, f"{old} lost {missing}"
    assert names <= set(module.__all__)
    new = importlib.import_module(OLD_MODULES[name])
    for public in names & set(dir(new)):
        assert getattr(module, public) is getattr(new, public), public


def test_the_history_of_the_old_package_is_at_hand_so_every_name_is_checked() -> None:
    if old_public_names("session") is None:
        pytest.skip("no git history here: only the names jobs used are checked")
    listed = subprocess.run(["git", "ls-tree", "--name-only", f"{SPLIT}^", "airflow_kafka_stream/spark/"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    modules = {Path(p).stem for p in listed if p.endswith(".py") and not p.endswith("__init__.py")}
    assert modules == set(OLD_MODULES)


def test_the_old_checkpoint_position_reads_the_position(tmp_path) -> None:
    from airflow_kafka_stream.core.offsets import TopicPartition

    module, _ = import_fresh("airflow_kafka_stream.spark.runtime")
    assert module.checkpoint_position(str(tmp_path)) == (None, None, False)
    (tmp_path / "metadata").write_text('{"id":"q"}')
    for directory in ("offsets", "commits"):
        (tmp_path / directory).mkdir()
    (tmp_path / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"t":{"0":5}}')
    (tmp_path / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    (tmp_path / "offsets" / "1").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":2,"conf":{}}\n{"t":{"0":9}}')
    assert module.checkpoint_position(str(tmp_path)) == (0, {TopicPartition("t", 0): 5}, True)


def test_a_job_run_as_a_script_sees_the_warning(tmp_path) -> None:
    """Python shows a DeprecationWarning by default only when it is attributed to ``__main__``: the job's line."""
    job = tmp_path / "job.py"
    job.write_text("from airflow_kafka_stream.spark.session import local_session\nprint(local_session.__module__)\n")
    done = subprocess.run([sys.executable, str(job)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "airflow_kafka_stream.runtime.session"
    assert "airflow_kafka_stream.spark.session is deprecated: import from airflow_kafka_stream.runtime.session" \
        in done.stderr and "job.py:1" in done.stderr, done.stderr
