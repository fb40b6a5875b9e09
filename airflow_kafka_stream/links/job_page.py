"""The "Stream job" extra link: from a task to the job page of the job home it worked on.

Airflow 3 renders an extra link from an XCom the task pushed while it ran
(``BaseOperatorLink.xcom_key``), so the link names the job home the task was
really given, templates rendered. The page itself is the provider's UI plugin
(``plugins/job_page.py``); without the plugin the link still says where the
job lives, and every operator logs the job home as well.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom

#: Where the provider's UI plugin serves the job page (see plugins/job_page.py).
JOB_PAGE_PATH = "/stream-jobs/"


def job_page_url(job_home: str) -> str:
    return f"{JOB_PAGE_PATH}?home={quote(str(job_home), safe='')}"


class StreamJobPageLink(BaseOperatorLink):
    """A task's link to its job's page: state, lag per partition, savepoints, history."""

    name = "Stream job"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return XCom.get_value(ti_key=ti_key, key=self.xcom_key) or ""


def announce_job_home(operator: Any, context: Any, job_home: str) -> None:
    """Log where the job lives and persist the task's link to its page."""
    url = job_page_url(job_home)
    operator.log.info("job home: %s (job page: %s)", job_home, url)
    context["ti"].xcom_push(key=StreamJobPageLink().xcom_key, value=url)
