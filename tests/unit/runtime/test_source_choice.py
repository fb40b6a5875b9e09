"""Which source a job reads with: refused when unknown, and the example pipeline's switch."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.jobs.example_pipeline import parse_args
from airflow_kafka_stream.runtime import StreamConfig

REQUIRED = ["--home", "/h", "--bootstrap", "b:9092", "--topic", "t", "--group", "g", "--output", "/o"]


def test_an_unknown_source_is_refused_naming_both():
    config = StreamConfig(job_name="orders", bootstrap_servers="b:9092", group_id="g", topics=["t"],
                          source_format="kafka-stream")
    with pytest.raises(InvalidInputError, match="source_format 'kafka-stream' is not one of kafka_stream, kafka"):
        config.validate()


def test_the_example_reads_with_kafka_stream_unless_told_and_read_mode_belongs_to_kafka_stream(capsys):
    assert parse_args(REQUIRED).source == "kafka_stream"
    assert parse_args([*REQUIRED, "--source", "kafka"]).source == "kafka"
    with pytest.raises(SystemExit):
        parse_args([*REQUIRED, "--source", "kafka", "--read-mode", "driver"])
    assert "drop --read-mode" in capsys.readouterr().err


def test_the_example_takes_one_output_a_folder_or_a_topic(capsys):
    assert parse_args([*REQUIRED[:-2], "--output-topic", "out"]).output_topic == "out"
    with pytest.raises(SystemExit):
        parse_args([*REQUIRED, "--output-topic", "out"])
    assert "--output and --output-topic both name the output" in capsys.readouterr().err
