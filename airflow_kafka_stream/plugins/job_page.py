"""The job page in the Airflow UI: a FastAPI app served by the api-server, shown through external views.

``/stream-jobs/`` is the page (a page in the navigation, and a tab on every DAG
page that shows the job homes of that DAG's runs); ``/stream-jobs/api/jobs``
and ``/stream-jobs/api/job?home=...`` give the same data as JSON;
``POST /stream-jobs/savepoint?home=...`` (the page's "Take a savepoint now")
triggers the ``stream_savepoint`` DAG for that job home, for a user allowed to
run that DAG, and sends the browser to the new run. Every route
sits behind Airflow's own authentication and authorization (the JWT of the UI's
cookie or an ``Authorization: Bearer`` header, and read access to DAGs, or to
the one DAG named by ``dag_id``): plugin apps are anonymous unless they add
these dependencies.

Which job homes the page shows (only these; an arbitrary path is refused):

1. those listed in ``[airflow_kafka_stream] job_homes`` (comma-separated; the
   environment variable ``AIRFLOW__AIRFLOW_KAFKA_STREAM__JOB_HOMES``), shown even
   when missing, with the error;
2. the ``job_home`` of the newest runs of DAGs tagged ``airflow-kafka-stream``
   (the example DAGs) and the default of their ``job_home`` param, when such a
   directory is a job home.

Kafka settings come from the ``kafka_conn_id`` connection of that section
(default ``kafka_default``), storage options from its ``storage_conn_id``.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any
from urllib.parse import quote, urlsplit

from airflow.api.common.trigger_dag import trigger_dag
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import get_user, requires_access_dag
from airflow.configuration import conf
from airflow.exceptions import DagNotFound
from airflow.models.dag import DagTag
from airflow.models.dagrun import DagRun
from airflow.plugins_manager import AirflowPlugin
from airflow.settings import TIMEZONE
from airflow.utils.session import create_session
from airflow.utils.types import DagRunTriggeredByType
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy import select

from airflow_kafka_stream.errors import StreamError
from airflow_kafka_stream.plugins.job_page_html import page
from airflow_kafka_stream.plugins.job_view import job_view
from airflow_kafka_stream.plugins.state_html import SAVEPOINT_DAG
from airflow_kafka_stream.storage.jobhome import JobHome

# Lazy imports: hooks.stream_job (confluent-kafka, the Kafka provider) and params wait for a request or a trigger:
# every Airflow component that loads plugins imports this module.

SECTION = "airflow_kafka_stream"
TAG = "airflow-kafka-stream"
URL_PREFIX = "/stream-jobs"
#: How many recent runs of the tagged DAGs are searched for job homes.
RECENT_RUNS = 200


def _setting(key: str, default: str | None) -> str | None:
    return conf.get(SECTION, key, fallback=default) or default


def configured_homes() -> list[str]:
    return [h.strip() for h in (_setting("job_homes", "") or "").split(",") if h.strip()]


def _run_homes(dag_id: str | None) -> tuple[list[str], bool]:
    """``job_home`` values of the newest runs of the tagged DAGs (or of ``dag_id``), and whether it is tagged."""
    with create_session() as session:
        tagged = select(DagTag.dag_id).where(DagTag.name == TAG)
        query = select(DagRun.conf).order_by(DagRun.id.desc()).limit(RECENT_RUNS)
        query = query.where(DagRun.dag_id == dag_id) if dag_id else query.where(DagRun.dag_id.in_(tagged))
        confs = session.scalars(query).all()
        is_tagged = bool(dag_id) and session.scalar(
            select(DagTag.dag_id).where(DagTag.name == TAG, DagTag.dag_id == dag_id).limit(1)) is not None
    homes = [conf.get("job_home") for conf in confs if isinstance(conf, dict)]
    return [h.strip() for h in homes if isinstance(h, str) and h.strip()], is_tagged


def _is_job_home(url: str, storage_options: dict[str, Any]) -> bool:
    try:
        JobHome(url, storage_options).require()
    except (StreamError, OSError):
        return False
    return True


def known_homes(dag_id: str | None = None) -> list[str]:
    """The job homes the page shows (see the module docstring), configured first, then newest runs first."""
    from airflow_kafka_stream.params import job_home as job_home_param

    run_homes, tagged = _run_homes(dag_id)
    candidates = list(run_homes)
    if not dag_id or tagged:
        candidates.append(str(job_home_param().value))
    options = _storage_options()
    found = [] if dag_id and not tagged else configured_homes()
    for home in candidates:
        if home not in found and _is_job_home(home, options):
            found.append(home)
    return found


def _storage_options() -> dict[str, Any]:
    from airflow_kafka_stream.hooks.stream_job import StreamJobHook

    conn_id = _setting("storage_conn_id", None)
    return StreamJobHook("-", None, conn_id).storage_options() if conn_id else {}


def _view(home: str) -> dict[str, Any]:
    """One job home's view; a Kafka connection that cannot be read becomes that section's error."""
    from airflow_kafka_stream.hooks.stream_job import StreamJobHook

    conn_id = _setting("kafka_conn_id", "kafka_default")
    hook = StreamJobHook(home, conn_id, _setting("storage_conn_id", None))
    kafka_problem = None
    try:
        kafka = hook.kafka_config()
    except Exception as exc:  # noqa: BLE001 - a missing connection is shown, not raised (no secret in it)
        kafka, kafka_problem = {}, f"Kafka connection {conn_id!r}: {type(exc).__name__}: {exc}"
    view = job_view(home, kafka, hook.storage_options())
    if kafka_problem and "partitions" in view["errors"]:
        view["errors"]["partitions"] = kafka_problem
    return view


def ui_timezone() -> tzinfo:
    """The zone the page writes times in: Airflow's ``[core] default_timezone`` (Airflow 3 has no server-side
    ``default_ui_timezone`` any more; the UI's own zone picker lives in the browser, which this page cannot read)."""
    return TIMEZONE


def _authorized():
    """Airflow's own check: a valid login with read access to DAGs (the one named by ``dag_id``, if given)."""
    return Depends(requires_access_dag("GET"))


def create_app() -> FastAPI:
    app = FastAPI(title="Stream jobs", description="Spark streaming jobs reading Kafka, by job home",
                  dependencies=[_authorized()])

    @app.get("/", response_class=HTMLResponse)
    def job_page(dag_id: str | None = Query(None), home: str | None = Query(None)) -> str:
        homes = _pick(known_homes(dag_id), home)
        intro = (f"Job homes of the runs of {dag_id}." if dag_id else
                 "Every job home this Airflow knows: configured, and named by the example DAGs' runs.")
        return page("Stream jobs", [_view(h) for h in homes], intro, tz=ui_timezone())

    signed_in = Depends(get_user)

    @app.post("/savepoint", dependencies=[_may_run(SAVEPOINT_DAG)])
    def take_savepoint(request: Request, home: str = Query(...), user: Any = signed_in) -> RedirectResponse:
        _same_origin(request)
        _pick(known_homes(), home)
        run_id = _trigger(SAVEPOINT_DAG, {"job_home": home}, user.get_name())
        return RedirectResponse(f"../dags/{SAVEPOINT_DAG}/runs/{quote(run_id, safe='')}", status_code=303)

    @app.get("/api/jobs")
    def list_jobs(dag_id: str | None = Query(None)) -> dict[str, Any]:
        return {"job_homes": known_homes(dag_id)}

    @app.get("/api/job")
    def one_job(home: str = Query(...), dag_id: str | None = Query(None)) -> dict[str, Any]:
        return _view(_pick(known_homes(dag_id), home)[0])

    return app


def _may_run(dag_id: str):
    """Airflow's own check that the user may trigger runs of ``dag_id``."""
    return Depends(requires_access_dag("POST", DagAccessEntity.RUN, param_dag_id=dag_id))


def _same_origin(request: Request) -> None:
    """A form posted from another site is refused (the login cookie is SameSite=Lax already; this is the belt)."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        raise HTTPException(403, "a savepoint is triggered from the job page of this Airflow only")


def _trigger(dag_id: str, conf: dict[str, Any], user_name: str | None) -> str:
    """A manual run of ``dag_id`` with ``conf`` (validated against its Params), as the UI's trigger button makes."""
    try:
        run = trigger_dag(dag_id, triggered_by=DagRunTriggeredByType.UI, conf=conf, triggering_user_name=user_name)
    except DagNotFound as exc:
        raise HTTPException(404, f"the {dag_id} DAG is not deployed here: copy dags/{dag_id}.py of "
                                 "airflow-kafka-stream into the DAGs folder") from exc
    except ValueError as exc:  # the DAG refuses manual runs, or the params do not validate
        raise HTTPException(400, f"{dag_id} was not triggered: {exc}") from exc
    if run is None:
        raise HTTPException(500, f"{dag_id} was not triggered")
    return run.run_id


def _pick(homes: list[str], wanted: str | None) -> list[str]:
    if wanted is None:
        return homes
    if wanted not in homes:
        # Nothing more than that: the list of known homes (paths, bucket names) is not for every signed-in user.
        raise HTTPException(404, "no such job")
    return [wanted]


class StreamJobsPlugin(AirflowPlugin):
    """The job page: a navigation entry and a tab on DAG pages, over the FastAPI app."""

    name = "airflow_kafka_stream"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Stream jobs"}]
    external_views = [
        {"name": "Stream jobs", "href": "stream-jobs/", "destination": "nav", "url_route": "stream-jobs",
         "category": "browse"},
        {"name": "Stream job", "href": "stream-jobs/?dag_id={DAG_ID}", "destination": "dag",
         "url_route": "stream-job"},
    ]
