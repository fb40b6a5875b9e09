"""Which submission a start asks for (``ops.submission_plan``): the rules both front-ends share."""

from __future__ import annotations

import pytest

from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.ops.launcher import EXAMPLE_PIPELINE, Submission
from airflow_kafka_stream.ops.submission_plan import SubmissionRequest, plan_submission

HOME, BROKERS = "/jobs/orders", "broker:9092"
EXAMPLE = {"topics": ("orders",), "group": "g", "output_path": "/out"}
RUNNING = Submission("1", None, ("--home", HOME, "--app-version", "1", "--topic", "orders"),
                     {"spark.sql.shuffle.partitions": "4"}, "cluster", "packed", True, "yarn", "spark_yarn", "kafka_prod")


def plan(running: Submission | None = None, **given) -> Submission:
    return plan_submission(SubmissionRequest(app_version="2", **given), job_home=HOME, bootstrap_servers=BROKERS,
                           running=running)


def test_the_example_pipeline_gets_its_arguments_and_runs_locally_by_default():
    found = plan(**EXAMPLE)
    assert found.program == EXAMPLE_PIPELINE and found.master == "local[*]"
    assert found.application_args[:4] == ("--home", HOME, "--bootstrap", BROKERS)
    assert "--app-version" in found.application_args and found.application_args[-2:] == ("--topic", "orders")


def test_an_application_of_your_own_with_the_examples_settings_gets_the_examples_arguments():
    found = plan(application="/apps/mine.py", **EXAMPLE)
    assert found.application == "/apps/mine.py" and "--group" in found.application_args


def test_an_application_of_your_own_may_take_no_arguments():
    assert plan(application="/apps/mine.py").application_args == ()


def test_arguments_given_are_passed_as_they_are():
    assert plan(application="/apps/mine.py", application_args=("--x", "1"), **EXAMPLE).application_args == ("--x",
                                                                                                             "1")


def test_the_example_without_its_settings_is_refused_naming_them():
    with pytest.raises(InvalidInputError, match="the example pipeline needs group, output_path") as raised:
        plan(topics=("orders",))
    assert raised.value.settings == ("group", "output_path")


def test_a_new_version_of_the_same_program_needs_only_a_version():
    found = plan(RUNNING)
    assert found.app_version == "2" and found.application == RUNNING.application
    assert found.application_args == ("--home", HOME, "--app-version", "2", "--topic", "orders")
    assert (found.master, found.deploy_mode, found.executor_environment, found.job_home_shared) == (
        "yarn", "cluster", "packed", True)
    assert (found.spark_conn_id, found.kafka_conn_id) == ("spark_yarn", "kafka_prod")


def test_a_new_version_inherits_where_it_runs_unless_given_and_spark_settings_add_up():
    found = plan(RUNNING, spark_conf={"spark.executor.memory": "2g"}, master="spark://m:7077", **EXAMPLE)
    assert found.master == "spark://m:7077" and found.deploy_mode == "cluster"
    assert found.spark_conf == {"spark.sql.shuffle.partitions": "4", "spark.executor.memory": "2g"}
    assert "--bootstrap" in found.application_args  # the example's settings given: its arguments, built anew


def test_a_first_start_inherits_nothing():
    found = plan(None, **EXAMPLE)
    assert (found.deploy_mode, found.executor_environment, found.job_home_shared, found.spark_conf) == (
        None, None, False, {})


def test_a_new_version_keeps_where_its_kafka_connector_comes_from_unless_given():
    running = Submission("1", "/apps/mine.py", kafka_connector="provided")
    assert plan(running).kafka_connector == "provided"
    assert plan(running, kafka_connector="bundled").kafka_connector == "bundled"
    assert plan(None, application="/apps/mine.py").kafka_connector is None  # auto


def test_a_recorded_kafka_connector_replays_and_an_unknown_one_is_refused():
    assert Submission.from_record(Submission("1", kafka_connector="Bundled").to_record()).kafka_connector == "bundled"
    with pytest.raises(InvalidInputError, match="kafka_connector 'maven' is not one of"):
        Submission("1", kafka_connector="maven")


def test_the_example_reads_with_the_source_given_and_a_new_version_may_change_only_its_source():
    assert plan(source="kafka", **EXAMPLE).application_args[-2:] == ("--source", "kafka")
    assert "--source" not in plan(**EXAMPLE).application_args, "the default source is not spelled out"
    moved = plan(RUNNING, source="kafka")
    assert moved.application_args == ("--home", HOME, "--app-version", "2", "--topic", "orders", "--source", "kafka")
    back = plan(moved, source="kafka_stream")
    assert back.application_args[-2:] == ("--source", "kafka_stream") and back.application_args.count("--source") == 1


def test_a_new_version_given_the_examples_settings_keeps_the_running_versions_source_unless_told():
    on_spark = plan(RUNNING, source="kafka")
    assert plan(on_spark, **EXAMPLE).application_args[-2:] == ("--source", "kafka")
    assert plan(on_spark, source="kafka_stream", **EXAMPLE).application_args[-2:] == ("--source", "kafka_stream")


def option(arguments, flag: str):
    found = list(arguments)
    return found[found.index(flag) + 1] if flag in found else None


def test_the_example_declares_its_output_asset_and_a_new_version_keeps_or_changes_it():
    declared = plan(output_asset="file:///out", asset_every="PT15M", watermark_delay="PT5M", **EXAMPLE)
    assert [option(declared.application_args, flag) for flag in ("--output-asset", "--asset-every",
                                                                 "--watermark-delay")] == ["file:///out", "PT15M", "PT5M"]
    assert option(plan(**EXAMPLE).application_args, "--output-asset") is None, "no asset unless declared"
    # A new version keeps the running version's asset, with its settings or new arguments of the example alike.
    assert option(plan(declared).application_args, "--output-asset") == "file:///out"
    assert option(plan(declared, **EXAMPLE).application_args, "--asset-every") == "PT15M"
    moved = plan(declared, output_asset="s3://lake/out")
    assert option(moved.application_args, "--output-asset") == "s3://lake/out"
    assert moved.application_args.count("--output-asset") == 1


@pytest.mark.parametrize(("given", "named"), [
    ({"output_asset": "out"}, "output_asset"),
    ({"output_asset": "file:///out", "asset_every": "PT7M"}, "asset_every"),
    ({"output_asset": "file:///out", "watermark_delay": "10 minutes"}, "watermark_delay"),
])
def test_a_bad_output_asset_setting_is_refused_naming_it(given, named):
    with pytest.raises(InvalidInputError) as refused:
        plan(**given, **EXAMPLE)
    assert named in refused.value.settings


def test_the_example_writes_to_a_kafka_topic_instead_of_files_when_given_one():
    found = plan(topics=("orders",), group="g", output_topic="orders-out")
    assert option(found.application_args, "--output-topic") == "orders-out"
    assert "--output" not in found.application_args
    with pytest.raises(InvalidInputError) as refused:
        plan(topics=("orders",), group="g")
    assert "output_path" in refused.value.settings


def test_an_output_path_and_an_output_topic_together_are_refused_naming_both():
    """The example writes to one of them: with both, one would be ignored without a word."""
    with pytest.raises(InvalidInputError, match="give output_path for Parquet files or output_topic") as refused:
        plan(topics=("orders",), group="g", output_path="/out", output_topic="orders-out")
    assert set(refused.value.settings) == {"output_path", "output_topic"}


def test_skip_replays_goes_with_an_output_topic_only():
    found = plan(topics=("orders",), group="g", output_topic="orders-out", skip_replays=True)
    assert "--skip-replays" in found.application_args
    with pytest.raises(InvalidInputError, match="give output_topic with it") as refused:
        plan(topics=("orders",), group="g", output_path="/out", skip_replays=True)
    assert refused.value.settings == ("skip_replays",)
