"""The "Stream job" extra link: from a task to the job page of the job home it works on.

One mechanism for every operator and sensor that takes a job home: inherit
:class:`JobHomeTask` (first, before ``BaseOperator``). It declares the link,
logs the job home before ``execute`` (and before each resumption after a
deferral) and pushes the link so it shows while the task still runs.

Airflow 3 computes each extra link in the task process when the task ends
(defers, succeeds, fails or is skipped: the task runner's ``finalize``) and
stores it as the XCom ``BaseOperatorLink.xcom_key``; the UI and the REST API
read only that XCom. So :meth:`StreamJobPageLink.get_link` builds the URL from
the operator's rendered ``job_home`` instead of reading an XCom back: a task
that never pushed one (skipped at once, failed early) gets its link all the
same, and the execution API is never asked for an XCom that does not exist
(which the supervisor logs as an error). The page itself is the provider's UI
plugin (``plugins/job_page.py``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

#: Where the provider's UI plugin serves the job page (see plugins/job_page.py).
JOB_PAGE_PATH = "/stream-jobs/"


def job_page_url(job_home: str) -> str:
    return f"{JOB_PAGE_PATH}?home={quote(str(job_home), safe='')}"


def rendered_job_home(operator: Any) -> str | None:
    """The operator's job home once its templates are rendered (None before, or when it has none)."""
    home = getattr(operator, "job_home", None)
    if not isinstance(home, str) or not home or "{{" in home or "{%" in home:
        return None
    return home


class StreamJobPageLink(BaseOperatorLink):
    """A task's link to its job's page: state, lag per partition, savepoints, history."""

    name = "Stream job"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        home = rendered_job_home(operator)
        return job_page_url(home) if home else ""


def announce_job_home(operator: Any, context: Any, job_home: str) -> None:
    """Log where the job lives and push the task's link to its page at once (Airflow pushes it again at the end)."""
    url = job_page_url(job_home)
    operator.log.info("job home: %s (job page: %s)", job_home, url)
    context["ti"].xcom_push(key=StreamJobPageLink().xcom_key, value=url)


class JobHomeTask:
    """Mixin of every operator and sensor that works on a job home (``self.job_home``, templated).

    It gives the task the "Stream job" link and logs the job home first, before ``execute`` or a resumption.
    """

    operator_extra_links = (StreamJobPageLink(),)

    def pre_execute(self, context: Any) -> None:
        home = rendered_job_home(self)
        if home:
            announce_job_home(self, context, home)
        super().pre_execute(context)  # type: ignore[misc]
