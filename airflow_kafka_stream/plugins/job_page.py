"""The job page in the Airflow UI: a FastAPI app served by the api-server, shown through external views.

``/stream-jobs/`` is the page (a page in the navigation, and a tab on every DAG
page that shows the job homes of that DAG's runs); ``/stream-jobs/api/jobs``
and ``/stream-jobs/api/job?home=...`` give the same data as JSON;
``POST /stream-jobs/savepoint?home=...`` (the page's "Take a savepoint now")
triggers the ``stream_savepoint`` DAG for that job home, for a user allowed to
run that DAG, and sends the browser to the new run; the other actions
(``/stop``, ``/upgrade``, ``/reset-plan`` then ``/reset``, ``/restore``,
``/resume``; ``job_actions``) trigger their example DAG and come back to the
page, which lists the job's runs of them. Every route
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

from airflow_kafka_stream.core.redaction import redact_text, secret_values
from airflow_kafka_stream.errors import StreamError
from airflow_kafka_stream.plugins.actions_html import refreshing, reset_confirmation
from airflow_kafka_stream.plugins.job_actions import ACTION_DAGS, ACTIONS, Action, FormError, ResetChoice, run_outcome
from airflow_kafka_stream.plugins.job_page_html import page
from airflow_kafka_stream.plugins.job_view import job_view
from airflow_kafka_stream.plugins.state_html import SAVEPOINT_DAG
from airflow_kafka_stream.storage.jobhome import JobHome

# Lazy imports: hooks.stream_job (confluent-kafka, the Kafka provider) and params wait for a request or a trigger:
# every Airflow component that loads plugins imports this module.

SECTION = "airflow_kafka_stream"
TAG = "airflow-kafka-stream"
URL_PREFIX = "/stream-jobs"
#: How many recent runs of the tagged DAGs are searched for job homes (and of the action DAGs for a job's runs).
RECENT_RUNS = 200
#: How many of a job's runs of the action DAGs the page shows, and how often it reloads while one goes on.
RUNS_SHOWN = 8
REFRESH_SECONDS = 5
#: The signed-in Airflow user of a request (Airflow's own dependency).
SIGNED_IN = Depends(get_user)


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
    def job_page(dag_id: str | None = Query(None), home: str | None = Query(None), user: Any = SIGNED_IN) -> str:
        homes = _pick(known_homes(dag_id), home)
        intro = (f"Job homes of the runs of {dag_id}." if dag_id else
                 "Every job home this Airflow knows: configured, and named by the example DAGs' runs.")
        allowed = allowed_actions(user)
        views = [{**view, "operate": {"allowed": allowed, "runs": job_runs(view["job_home"], view.get("history"))}}
                 for view in map(_view, homes)]
        active = any(refreshing(view["operate"]["runs"]) for view in views)
        return page("Stream jobs", views, intro, tz=ui_timezone(), refresh_seconds=REFRESH_SECONDS if active else None)

    @app.post("/savepoint", dependencies=[_may_run(SAVEPOINT_DAG)])
    def take_savepoint(request: Request, home: str = Query(...), user: Any = SIGNED_IN) -> RedirectResponse:
        _same_origin(request)
        _pick(known_homes(), home)
        run_id = _trigger(SAVEPOINT_DAG, {"job_home": home}, user.get_name())
        return RedirectResponse(f"../dags/{SAVEPOINT_DAG}/runs/{quote(run_id, safe='')}", status_code=303)

    for action in ACTIONS.values():
        if action.name != "savepoint":
            app.post(f"/{action.name}", dependencies=[_may_run(action.dag_id)])(_action_route(action))

    @app.post("/reset-plan", response_class=HTMLResponse, dependencies=[_may_run(ACTIONS["reset"].dag_id)])
    async def plan_reset(request: Request, home: str = Query(...)) -> str:
        """The dry run's plan and what executing it changes, with the confirmation (nothing is triggered yet)."""
        _same_origin(request)
        _pick(known_homes(), home)
        choice = _refused_as_400(ResetChoice.of, await _form(request))
        return page("Reset plan", [], tz=ui_timezone(), body=_reset_plan(home, choice))

    @app.get("/api/jobs")
    def list_jobs(dag_id: str | None = Query(None)) -> dict[str, Any]:
        return {"job_homes": known_homes(dag_id)}

    @app.get("/api/job")
    def one_job(home: str = Query(...), dag_id: str | None = Query(None)) -> dict[str, Any]:
        return _view(_pick(known_homes(dag_id), home)[0])

    return app


def _action_route(action: Action):
    """The route of one action: its form's fields become the run's params, then the page shows the run."""

    async def run_action(request: Request, home: str = Query(...), user: Any = SIGNED_IN) -> RedirectResponse:
        _same_origin(request)
        _pick(known_homes(), home)
        conf = _refused_as_400(lambda form: action.build(home, form), await _form(request))
        _trigger(action.dag_id, conf, user.get_name())
        return RedirectResponse(f"./?home={quote(home, safe='')}", status_code=303)

    run_action.__name__ = f"run_{action.name}"
    return run_action


async def _form(request: Request) -> dict[str, str]:
    """The posted form's fields (the last value of each)."""
    return {key: str(value) for key, value in (await request.form()).items()}


def _refused_as_400(build, form: dict[str, str]):
    """The form's params, or 400 naming the field and the fix (nothing is triggered)."""
    try:
        return build(form)
    except FormError as exc:
        raise HTTPException(400, f"{exc} (field {exc.field})") from exc


def _reset_plan(home: str, choice: ResetChoice) -> str:
    """The reset's dry run, as the reset DAG's own dry run plans it, as HTML with its confirmation."""
    from airflow_kafka_stream.hooks.stream_job import StreamJobHook
    from airflow_kafka_stream.ops import reset
    from airflow_kafka_stream.ops.guard import job_shown_state
    from airflow_kafka_stream.render.reset import plan_text

    hook = StreamJobHook(home, _setting("kafka_conn_id", "kafka_default"), _setting("storage_conn_id", None))
    request = reset.ResetRequest(choice.strategy, choice.value or None, list(choice.topics))
    try:
        ctx = hook.context()
        planned = reset.plan(ctx, request)
        shown = job_shown_state(ctx.home)[0]
    except StreamError as exc:
        raise HTTPException(400, f"the reset cannot be planned: {redact_text(str(exc), _secrets(hook))}") from exc
    return reset_confirmation(home, choice, planned.to_dict(), plan_text(planned), str(shown.state))


def _secrets(hook) -> list[str]:
    try:
        return secret_values(hook.kafka_config())
    except Exception:  # noqa: BLE001 - no connection, no secret to mask
        return []


def allowed_actions(user: Any) -> list[str]:
    """The actions whose DAG Airflow lets ``user`` trigger (the page shows no other; the routes check again)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    manager = get_auth_manager()
    return [a.name for a in ACTIONS.values() if manager.is_authorized_dag(
        method="POST", access_entity=DagAccessEntity.RUN, details=DagDetails(id=a.dag_id), user=user)]


def job_runs(home: str, history: list[dict[str, Any]] | None, limit: int = RUNS_SHOWN) -> list[dict[str, Any]]:
    """The newest runs of the action DAGs for ``home``, with what their operations recorded in the history."""
    with create_session() as session:
        rows = session.execute(select(DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.conf,
                                      DagRun.triggering_user_name)
                               .where(DagRun.dag_id.in_(ACTION_DAGS)).order_by(DagRun.id.desc())
                               .limit(RECENT_RUNS)).all()
    runs = [{"dag_id": dag_id, "run_id": run_id, "state": str(state), "by": by,
             "outcome": run_outcome(history or [], run_id)}
            for dag_id, run_id, state, conf, by in rows if isinstance(conf, dict) and conf.get("job_home") == home]
    return runs[:limit]


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
