"""The packed executor environment: what a node unpacks is a virtual environment with the C reader and no Airflow."""

from __future__ import annotations

import os
import subprocess
import tarfile

import pytest

from airflow_kafka_stream.cluster.environment import base_interpreter, pack_executor_environment
from airflow_kafka_stream.errors import InvalidInputError

pytestmark = pytest.mark.integration


def test_the_archive_runs_the_c_reader_without_airflow(executor_environment, tmp_path):
    with tarfile.open(executor_environment) as archive:
        names = set(archive.getnames())
        python = archive.getmember("bin/python")
        archive.extractall(tmp_path, filter="tar")
    assert python.issym() and python.linkname == base_interpreter(), "the same interpreter path on every node"
    site = "lib/python3.11/site-packages"
    assert any(n.startswith(f"{site}/airflow_kafka_stream/source/_kafka_arrow") and n.endswith(".so") for n in names)
    assert not any(n.startswith((f"{site}/airflow/", f"{site}/pyspark/jars/")) for n in names), \
        "Airflow and Spark's jars stay out: executors never import the one and each node has the other"
    probe = ("import sys, airflow_kafka_stream.source.source\n"
             "from airflow_kafka_stream.source.native_reader import native_module, native_unavailable_reason\n"
             "assert native_module() is not None, native_unavailable_reason()\n"
             "try:\n    import airflow\nexcept ImportError:\n    print('no airflow', sys.prefix)\n")
    done = subprocess.run([str(tmp_path / "bin" / "python"), "-c", probe], capture_output=True, text=True,
                          env={"PATH": os.defpath}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"no airflow {tmp_path}", "the unpacked environment, not this one, ran"
    assert pack_executor_environment() == type(pack_executor_environment())(executor_environment), "cached"


def test_a_distribution_that_is_not_installed_is_named():
    with pytest.raises(InvalidInputError, match="distribution 'no-such-dist' is not installed"):
        pack_executor_environment(extra_distributions=["no-such-dist"])
