"""The "Stream job" link: one mechanism for every operator and sensor that takes a job home."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from airflow.sdk import BaseOperator

import airflow_kafka_stream.operators
import airflow_kafka_stream.sensors
from airflow_kafka_stream.links.job_page import JobHomeTask, StreamJobPageLink
from airflow_kafka_stream.tasks.refusals import parameters_of


def _tasks_taking_a_job_home() -> list[type]:
    found = []
    for package in (airflow_kafka_stream.operators, airflow_kafka_stream.sensors):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for _name, klass in inspect.getmembers(module, inspect.isclass):
                if (issubclass(klass, BaseOperator) and klass.__module__ == module.__name__
                        and "job_home" in parameters_of(klass)):
                    found.append(klass)
    return found


#: Declare the link themselves for now, being reworked for issue 20's event-driven recovery: they move to JobHomeTask
#: with it. Their link is the same class, so it is built the same way.
OWN_DECLARATION = {"StreamWatchdogOperator", "StreamSupervisorOperator"}


@pytest.mark.parametrize("klass", _tasks_taking_a_job_home(), ids=lambda k: k.__name__)
def test_every_operator_and_sensor_with_a_job_home_declares_the_link(klass):
    assert any(isinstance(link, StreamJobPageLink) for link in klass.operator_extra_links), klass
    if klass.__name__ not in OWN_DECLARATION:
        assert issubclass(klass, JobHomeTask), f"{klass.__name__} should inherit JobHomeTask"


def test_the_standby_and_the_health_gate_are_among_them():
    names = {k.__name__ for k in _tasks_taking_a_job_home()}
    assert {"StreamStandbyOperator", "UpgradeSubmitOperator", "StreamJobHealthSensor", "RollbackStopOperator"} <= names


class _Task:
    def __init__(self, job_home):
        self.job_home = job_home


@pytest.mark.parametrize(("job_home", "expected"), [
    ("/jobs/orders", "/stream-jobs/?home=%2Fjobs%2Forders"),  # rendered: the page of that home
    ("s3://b/jobs/x", "/stream-jobs/?home=s3%3A%2F%2Fb%2Fjobs%2Fx"),
    ("{{ params.job_home }}", ""),  # not rendered (the task failed before): no link to a template
    (None, ""),
])
def test_the_link_is_built_from_the_rendered_job_home_without_reading_an_xcom(job_home, expected):
    assert StreamJobPageLink().get_link(_Task(job_home), ti_key=None) == expected
