"""The full Airflow stack (api-server, scheduler, dag-processor, triggerer) driven through its REST API and UI.

One stack and one job for the module: version 1 is submitted with ``stream_submit`` and upgraded to version 2
with ``stream_upgrade``, both triggered with ``POST /api/v2/dags/{dag_id}/dagRuns``, while events are fed.
Every wait of the upgrade is deferred to the triggerer: the task instances are watched while the run goes,
and the default pool is looked at while one is deferred. Then the job page plugin is read through its API
(with and without a login) and in a real headless Chromium inside the Airflow UI. Airflow's ``[openlineage]``
points at a local receiver: the tasks' and drivers' events are checked once after the upgrade. Last, on a job of its own, the
event-driven supervisor restarts a killed driver, leaves a stopped job alone and gives up on a crash loop (on the
same stack: a second one would cost its start and its idle CPU for minutes).
"""

from __future__ import annotations

import json
import os
import signal
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest

from airflow_kafka_stream.devstack.airflow_stack import VIEWER
from airflow_kafka_stream.ops.inspect import job_status
from airflow_kafka_stream.storage.jobhome import JobHome
from tests.conftest import ROOT, STACK_SECRET
from tests.integration.airflow.test_airflow_submit import _stop, drivers_of, kill_drivers
from tests.integration.airflow.test_airflow_upgrade import Feeder, output_ids
from tests.integration.airflow.test_airflow_watchdog import wait_for
from tests.kafka_utils import create_topic, produce, unique, watermarks
from tests.lineage_receiver import check_driver_runs, driver_runs, launchers

# The module fixture (stack, submit, upgrade) is charged to the first test: a few minutes on two idle cores.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

PARTITIONS = 2
#: The supervisor's restart must have the job back within this: the bench's bar is 1.5 x a scripted restart (a
#: driver start, 20-60 s on two shared cores), with margin.
RECOVERY_BOUND_SECONDS = 150
ARTIFACTS = ROOT / "tests" / "artifacts"
#: Tasks of the upgrade that wait (for a standby to come up, a drain, a health window) and so must defer. The
#: new version's start is not one of them: the stop gave the standby its go, so the new version already runs
#: when that task first looks, and a wait that is over at its first look does not defer.
WAITING_TASKS = ("upgrade.start_standby", "upgrade.stop_with_savepoint", "upgrade.health_gate")


def run_and_watch(stack, dag_id: str, conf: dict, token: str, timeout: float = 600.0) -> dict:
    """Trigger a run through the REST API and poll it to its end (:func:`watch_run`)."""
    stack.unpause(dag_id, token)
    status, run = stack.trigger(dag_id, conf, token)
    assert status == 200, run
    return watch_run(stack, dag_id, run["dag_run_id"], token, timeout)


def watch_run(stack, dag_id: str, run_id: str, token: str, timeout: float = 600.0) -> dict:
    """Poll a run to its end, noting every state each task was seen in and, whenever a task was deferred and
    none ran, how many slots the default pool had running."""
    run = {"dag_run_id": run_id}
    seen: dict[str, set[str]] = {}
    pool_while_deferred: list[dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tis = stack.task_instances(dag_id, run["dag_run_id"], token)
        for task_id, ti in tis.items():
            seen.setdefault(task_id, set()).add(str(ti["state"]))
        states = {str(ti["state"]) for ti in tis.values()}
        if "deferred" in states and not states & {"running", "queued", "scheduled"}:
            pool_while_deferred.append(stack.request("GET", "/api/v2/pools/default_pool", token=token)[1])
        _status, now = stack.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}", token=token)
        if now["state"] in ("success", "failed"):
            tis = stack.task_instances(dag_id, run["dag_run_id"], token)
            final = {task_id: str(ti["state"]) for task_id, ti in tis.items()}
            return {"run": now, "tasks": final, "seen": seen, "pool_while_deferred": pool_while_deferred,
                    "failed_logs": {task_id: failed_log(stack, dag_id, run_id, task_id, ti, token)
                                    for task_id, ti in tis.items() if ti["state"] == "failed"}}
        time.sleep(0.5)
    raise AssertionError(f"{dag_id} run {run['dag_run_id']} did not end in {timeout:.0f}s; seen {seen}; "
                         f"scheduler log: {stack.log_tail('scheduler')}")


def failed_log(stack, dag_id: str, run_id: str, task_id: str, ti: dict, token: str) -> str:
    """The end of a failed task's log (what a failing test shows to say why)."""
    _status, body = stack.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/"
                                  f"{ti.get('try_number') or 1}?full_content=true", token=token)
    lines = body.get("content", body) if isinstance(body, dict) else body
    text = "\n".join(str(line.get("event", line)) if isinstance(line, dict) else str(line) for line in lines) \
        if isinstance(lines, list) else str(lines)
    return text


def scheduled_run(stack, dag_id: str, token: str, timeout: float = 300.0) -> dict:
    """Unpause a scheduled DAG and wait for the run its schedule creates (catchup off: the latest interval)."""
    stack.unpause(dag_id, token)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _status, runs = stack.request("GET", f"/api/v2/dags/{dag_id}/dagRuns?run_type=scheduled", token=token)
        ended = [r for r in runs["dag_runs"] if r["state"] in ("success", "failed")]
        if ended:
            return ended[0]
        time.sleep(2)
    raise AssertionError(f"no scheduled run of {dag_id} ended in {timeout:.0f}s: {stack.log_tail('scheduler')}")


@pytest.fixture(scope="module")
def upgraded(airflow_stack, stack_job, kafka_bootstrap):
    """A job submitted as version 1 and upgraded to version 2, both through the REST API, fed meanwhile; then
    the scheduled verify, which checks this job because the stack's DAG defaults point at it."""
    from airflow_kafka_stream.devstack.airflow_stack import wait_for_dags

    job = dict(stack_job)
    home, topic = Path(job["job_home"]), job["topics"][0]
    wait_for_dags(airflow_stack, ["stream_submit", "stream_upgrade", "stream_offset_reset", "stream_verify",
                                  "stream_stop", "stream_watchdog", "stream_supervisor", "stream_restore"])
    token = airflow_stack.token()
    feeder = Feeder(kafka_bootstrap, topic)
    feeder.start()
    try:
        submitted = run_and_watch(airflow_stack, "stream_submit", {**job, "app_version": "1"}, token)
        assert submitted["tasks"] == {"submit": "success"}, submitted
        # The health window counts from RUNNING, before the new version's first batch, which took 46-73 s on two
        # cores shared with other Spark jobs (a few seconds on idle ones): a shorter window fails a healthy upgrade.
        upgrade = run_and_watch(airflow_stack, "stream_upgrade", {
            **job, "new_version": "2", "health_batches": 1, "health_window_seconds": 10,
            "stop_timeout_seconds": 120, "health_timeout_seconds": 300}, token)
        verified = scheduled_run(airflow_stack, "stream_verify", token)
        yield {"home": home, "topic": topic, "job": job, "submit": submitted, "upgrade": upgrade,
               "verify": verified, "feeder": feeder}
    finally:
        feeder.stop()
        _stop(home)


def test_an_upgrade_triggered_through_the_rest_api_defers_its_waits_and_succeeds(airflow_stack, upgraded):
    upgrade = upgraded["upgrade"]
    home = JobHome(str(upgraded["home"]))
    assert upgrade["run"]["state"] == "success", (upgrade["failed_logs"], [
        (r["operation"], r["result"], r.get("error")) for r in home.history()[-4:]], upgrade["tasks"])
    assert upgrade["tasks"]["upgrade.outcome"] == "success"
    assert upgrade["tasks"]["upgrade.rollback_stop_new_version"] == "skipped"
    assert (home.spec()["version"], home.status()["state"]) == ("2", "RUNNING")
    for task_id in WAITING_TASKS:
        assert "deferred" in upgrade["seen"][task_id], (task_id, upgrade["seen"])
    # While the run waited, no task held a worker slot: the deferred task counts in no running slot.
    assert upgrade["pool_while_deferred"], "no moment with a deferred task and none running was seen"
    assert all(pool["running_slots"] == 0 for pool in upgrade["pool_while_deferred"]), upgrade["pool_while_deferred"]
    assert any(pool["deferred_slots"] >= 1 for pool in upgrade["pool_while_deferred"])
    # The triggerer, not a worker, ran the triggers that ended those waits: it writes their own log beside the task's.
    run_logs = airflow_stack.home / "logs" / "dag_id=stream_upgrade" / f"run_id={upgrade['run']['dag_run_id']}"
    for task_id in WAITING_TASKS:
        written = "".join(p.read_text(errors="replace") for p in (run_logs / f"task_id={task_id}").glob(
            "attempt=*.log.trigger.*.log"))
        # The trigger was started there and its own code logged from there (the "fired" line may be flushed later).
        assert "starting" in written and '"logger":"airflow_kafka_stream.triggers.' in written, (task_id, written[-2000:])


def test_the_stacks_tasks_and_drivers_report_one_streaming_job_to_openlineage(airflow_stack, upgraded, stack_lineage):
    """Through the whole stack (workers, triggerer, scheduler as separate processes): the submit's driver and the
    upgrade's standby are two runs of one streaming job, under the task runs that launched them."""
    home, topic = upgraded["home"], upgraded["topic"]
    events = stack_lineage.wait_for(lambda found: len(driver_runs(found, home.name)) >= 2 and any(
        e["job"]["name"] == "stream_upgrade.upgrade.outcome" and e["eventType"] == "COMPLETE" for e in found), 60)
    runs = check_driver_runs(events, home.name, "aks-stack")
    assert {"stream_submit.submit", "stream_upgrade.upgrade.start_standby"} <= launchers(runs), launchers(runs)
    submit = next(e for e in events if e["job"]["name"] == "stream_submit.submit" and e["eventType"] == "COMPLETE")
    assert [i["name"] for i in submit["inputs"]] == [topic]
    assert [(o["namespace"], o["name"]) for o in submit["outputs"]] == [("file", upgraded["job"]["output_path"])]
    assert STACK_SECRET not in json.dumps(events)


def test_the_scheduled_verify_checks_the_stacks_job_and_no_run_has_failed(airflow_stack, upgraded):
    """The stack points every example DAG's defaults at its job, so a scheduled run (no conf) checks that job."""
    token = airflow_stack.token()
    verified = upgraded["verify"]
    assert verified["state"] == "success", (verified, airflow_stack.task_instances("stream_verify",
                                                                                  verified["dag_run_id"], token))
    _status, details = airflow_stack.request("GET", "/api/v2/dags/stream_verify/details", token=token)
    assert details["params"]["job_home"]["value"] == str(upgraded["home"]), details["params"]
    _status, failed_runs = airflow_stack.request("GET", "/api/v2/dags/~/dagRuns?state=failed", token=token)
    assert failed_runs["total_entries"] == 0, failed_runs
    _status, failed_tis = airflow_stack.request("GET", "/api/v2/dags/~/dagRuns/~/taskInstances?state=failed",
                                                token=token)
    assert failed_tis["total_entries"] == 0, failed_tis
    # Four components share one SQLite file: none of them met a lock it could not wait out.
    for component in ("api-server", "scheduler", "triggerer", "dag-processor"):
        logged = airflow_stack.log_path(component).read_text(errors="replace")
        assert "database is locked" not in logged, (component, airflow_stack.log_tail(component))


@pytest.mark.parametrize(("conf", "named"), [
    ({"strategy": "to-yesterday"}, "to-yesterday"),
    ({"strategy": "to-datetime", "datetime": "2026-11-22T08:00:00"}, "date-time"),
])
def test_an_offset_reset_with_invalid_params_is_refused_with_400_and_nothing_runs(airflow_stack, upgraded, conf,
                                                                                  named):
    token = airflow_stack.token()
    history_before = JobHome(str(upgraded["home"])).history()
    status, body = airflow_stack.trigger("stream_offset_reset", {"job_home": str(upgraded["home"]), **conf}, token)
    assert status == 400, (body, airflow_stack.log_tail("api-server"))
    assert named in body["detail"]
    # The trigger form shows each Param's description: the date-time's says a zone is required, with an example.
    _status, details = airflow_stack.request("GET", "/api/v2/dags/stream_offset_reset/details", token=token)
    described = details["params"]["datetime"]["description"]
    assert "zone is required" in described and "2026-11-22T08:00:00Z" in described, described
    _status, runs = airflow_stack.request("GET", "/api/v2/dags/stream_offset_reset/dagRuns", token=token)
    assert runs["total_entries"] == 0, runs
    assert JobHome(str(upgraded["home"])).history() == history_before


def test_the_job_page_api_needs_an_airflow_login_and_shows_no_secret(airflow_stack, upgraded):
    home = str(upgraded["home"])
    status, _body = airflow_stack.request("GET", "/stream-jobs/api/jobs", token=None)
    assert status == 401
    status, _body = airflow_stack.request("GET", "/stream-jobs/", token=None)
    assert status == 401
    status, _body = airflow_stack.request("GET", "/stream-jobs/api/jobs", token="not-a-jwt")
    assert status == 403

    token = airflow_stack.token()
    status, listed = airflow_stack.request("GET", "/stream-jobs/api/jobs", token=token)
    assert status == 200 and home in listed["job_homes"], listed
    status, listed = airflow_stack.request("GET", "/stream-jobs/api/jobs?dag_id=stream_upgrade", token=token)
    assert status == 200 and home in listed["job_homes"], "the DAG tab lists its runs' job homes"
    status, refused = airflow_stack.request("GET", "/stream-jobs/api/job?home=/etc", token=token)
    assert status == 404, "only job homes the provider knows about are read"

    status, view = airflow_stack.request("GET", f"/stream-jobs/api/job?home={home}", token=token)
    assert status == 200, view
    assert view["errors"] == {}, view["errors"]
    assert (view["summary"]["state"], view["summary"]["app_version"]) == ("RUNNING", "2")
    assert view["summary"]["heartbeat_age_seconds"] < 30 and view["summary"]["last_batch_id"] is not None
    rows = {(r["topic"], r["partition"]): r for r in view["partitions"]}
    assert set(rows) == {(upgraded["topic"], p) for p in range(PARTITIONS)}
    for row in rows.values():
        assert row["high"] - row["checkpoint_offset"] == row["lag"] >= 0 and row["status"] in ("OK", "STALLED")
    assert view["savepoints"] and view["savepoints"][0]["valid"] is True, view["savepoints"]
    assert view["savepoints"][0]["app_version"] == "1", "the upgrade's savepoint is of the version it stopped"
    operations = [r["operation"] for r in view["history"]]
    assert {"submit", "stop"} <= set(operations), operations
    assert view["lag_samples"], "the running job records a lag sample per batch"
    _status, page = airflow_stack.request("GET", f"/stream-jobs/?home={home}", token=token)
    for text in (json.dumps(view), page):
        assert STACK_SECRET not in text and airflow_stack.password() not in text


def test_the_job_page_in_a_browser_shows_partitions_lag_and_savepoints(airflow_stack, upgraded):
    """Chromium logs in through the UI's cookie, opens the example DAG's tab and reads what a person sees."""
    from playwright.sync_api import sync_playwright

    chromium = Path("/usr/bin/chromium")
    assert chromium.exists(), "Chromium is missing: run scripts/setup-system (apt-get install chromium)"
    token = airflow_stack.token()
    _status, view = airflow_stack.request("GET", f"/stream-jobs/api/job?home={upgraded['home']}", token=token)
    newest_savepoint = view["savepoints"][0]["id"]
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "job_page.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), headless=True, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1800})
            context.add_cookies([{"name": "_token", "value": token, "url": airflow_stack.url}])
            page = context.new_page()
            page.goto(f"{airflow_stack.url}/dags/stream_upgrade/plugin/stream-job", wait_until="networkidle")
            frame = page.frame_locator("iframe").first
            table = frame.locator("table.partitions")
            table.wait_for(timeout=60_000)
            first_row = table.locator("tbody tr").first
            assert upgraded["topic"] in first_row.inner_text()
            assert frame.locator("p.lag-now").inner_text().startswith("Lag at the last batch:")
            assert frame.locator("svg.lag-plot polyline").count() == 1
            assert newest_savepoint in frame.locator("table.savepoints").inner_text()
            assert "RUNNING" in frame.locator("table.summary").inner_text()
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    print(f"job page screenshot: {shot}")


def _proc_field(pid: str, index: int) -> int | None:
    """A field of /proc/<pid>/stat counted after the command name (0: state, 2: process group, 3: session)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rsplit(")", 1)[1].split()[index + 1]) if index else None


def _pids_where(index: int, value: int) -> list[str]:
    return [p.name for p in Path("/proc").iterdir() if p.name.isdigit() and _proc_field(p.name, index) == value]


def listening(pids: list[str]) -> set[str]:
    """Every TCP address the processes listen on, as ``ip:port`` (read from /proc, as ``ss -ltnp`` does)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = str(fd.readlink())
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                hex_ip, hex_port = fields[1].split(":")
                found.add(f"{_ip(hex_ip)}:{int(hex_port, 16)}")
    return found


def listening_pids(pids: list[str]) -> dict[str, str]:
    """Each listening address of the processes, with the pid that holds it."""
    return {address: pid for pid in pids for address in listening([pid])}


def _command(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:200].decode(errors="replace")
    except OSError:
        return "?"


def _ip(hex_ip: str) -> str:
    import ipaddress

    if len(hex_ip) == 8:
        return str(ipaddress.IPv4Address(bytes.fromhex(hex_ip)[::-1]))
    words = b"".join(bytes.fromhex(hex_ip[i:i + 8])[::-1] for i in range(0, 32, 8))
    address = ipaddress.IPv6Address(words)
    return str(address.ipv4_mapped or address)


def test_the_stack_and_the_drivers_it_launched_listen_on_loopback_only(airflow_stack, upgraded):
    """What the fixture starts for a user (Airflow's components, the job's driver and its Spark UI) is reachable
    from this machine only."""
    for name, proc in airflow_stack.processes.items():
        addresses = listening(_pids_where(2, proc.pid))
        assert all(a.startswith(("127.", "::1:")) for a in addresses), (name, addresses)
        if name == "api-server":
            assert f"127.0.0.1:{airflow_stack.port}" in addresses, addresses
        if name == "execution-api":
            assert f"127.0.0.1:{airflow_stack.execution_port}" in addresses, addresses
    driver = JobHome(str(upgraded["home"])).status()["pid"]
    addresses = listening(_pids_where(3, _proc_field(str(driver), 3)))
    assert addresses, "the driver (its JVM: RPC, block manager, Spark UI) listens somewhere"
    others = {a: _command(pid) for a, pid in listening_pids(_pids_where(3, _proc_field(str(driver), 3))).items()
              if not a.startswith("127.")}
    assert not others, f"the driver (pid {driver}) session listens beyond loopback: {others}"


def _task_log(stack, dag_id: str, run_id: str, task_id: str) -> str:
    folder = stack.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
    return "".join(p.read_text(errors="replace") for p in sorted(folder.glob("attempt=*.log")))


def _resumed_task_failed_by_the_scheduler(stack, run_id: str, task_id: str) -> bool:
    """Whether Airflow failed the task as its trigger fired, without resuming it: the scheduler took the deferral's
    own exit, reported late, for the end of the resumed attempt (apache/airflow#67287 and #72716, open in 3.3.2).
    This stack defers every wait at once, so a wait that ends a few seconds after its deferral meets that race; the
    task then fails as it should, but its resumed half (the message quoting the driver's error) never ran."""
    scheduler_log = stack.log_path("scheduler").read_text(errors="replace")
    return any("finished with state success, but the task instance's state attribute is" in line
               and task_id in line and run_id in line for line in scheduler_log.splitlines())


def test_a_watchdog_run_logs_its_decision_once(airflow_stack, upgraded):
    token = airflow_stack.token()
    watched = run_and_watch(airflow_stack, "stream_watchdog", {"job_home": str(upgraded["home"])}, token)
    upgraded["watchdog"] = watched
    assert watched["tasks"] == {"watchdog": "success"}, watched
    run_id = watched["run"]["dag_run_id"]
    _status, xcom = airflow_stack.request(
        "GET", f"/api/v2/dags/stream_watchdog/dagRuns/{run_id}/taskInstances/watchdog/xcomEntries/return_value",
        token=token)
    value = xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"])
    reason = value["reason"]
    lines = [line for line in _task_log(airflow_stack, "stream_watchdog", run_id, "watchdog").splitlines()
             if reason in line]
    assert len(lines) == 1, lines


class JobPageBrowser:
    """A person at the job page in Chromium: fills an action's form, sends it, and follows the run it started."""

    def __init__(self, stack, token: str, home: str, page) -> None:
        self.stack, self.token, self.home, self.page = stack, token, home, page

    def open(self) -> None:
        self.page.goto(f"{self.stack.url}/stream-jobs/?home={quote(self.home, safe='')}", wait_until="load")

    def _fill(self, form, fields: dict, select: dict | None = None, untick: tuple = ()) -> None:
        for name, value in fields.items():
            form.locator(f'input[name="{name}"]').fill(value)
        for name, value in (select or {}).items():
            form.locator(f'select[name="{name}"]').select_option(value)
        for name in untick:
            form.locator(f'input[name="{name}"]').uncheck()

    def _started_run(self) -> dict:
        """The run the form just triggered: the newest row of the page's runs, followed to its end."""
        row = self.page.locator("table.runs tbody tr").first
        row.wait_for(timeout=30_000)
        dag_id, run_id = row.locator("td").first.inner_text(), row.locator("a").inner_text()
        return watch_run(self.stack, dag_id, run_id, self.token)

    def act(self, action: str, fields: dict, select: dict | None = None, untick: tuple = ()) -> dict:
        self.open()
        form = self.page.locator(f"form.action.{action}")
        self._fill(form, fields, select, untick)
        form.locator("button[type=submit]").click()
        self.page.wait_for_load_state("load")
        return self._started_run()

    def plan_reset(self, fields: dict) -> dict:
        """The reset form's plan page: the plan, the changes it names and its warning (nothing is triggered)."""
        self.open()
        form = self.page.locator("form.action.reset")
        self._fill(form, {"value": fields["value"]}, {"strategy": fields["strategy"]})
        form.locator("button[type=submit]").click()
        self.page.locator("pre.plan").wait_for(timeout=60_000)
        warning = self.page.locator("p.error")
        return {"plan": self.page.locator("pre.plan").inner_text(),
                "changes": self.page.locator(".changes").inner_text(),
                "warning": warning.inner_text() if warning.count() else ""}

    def confirm_reset(self) -> dict:
        self.page.locator("form.action.reset button[type=submit]").click()
        self.page.wait_for_load_state("load")
        return self._started_run()

    def first_option(self, action: str, name: str) -> str:
        self.open()
        return self.page.locator(f'form.action.{action} select[name="{name}"] option').first.get_attribute("value")

    def runs_text(self) -> str:
        self.open()
        return self.page.locator("table.runs").inner_text()


@contextmanager
def job_page_in_chromium(stack, token: str, home: str):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1800})
            context.add_cookies([{"name": "_token", "value": token, "url": stack.url}])
            yield JobPageBrowser(stack, token, home, context.new_page())
        finally:
            browser.close()


def test_a_cold_upgrade_rolled_back_a_stop_and_a_reset_link_every_task_to_the_job_page(airflow_stack, upgraded):
    """Runs last but one: it fails an upgrade on purpose (a version that exits before it reports), then stops the job.

    Every task instance of every run of the module that ran has the "Stream job" link to its job's page, through
    the REST API's links endpoint, and the scheduler logged no error about a link.
    """
    from airflow_kafka_stream.devstack.airflow_stack import StackError
    from tests.integration.airflow.test_airflow_upgrade import APPS

    token = airflow_stack.token()
    home = str(upgraded["home"])
    for dag_id in ("stream_upgrade", "stream_stop", "stream_offset_reset", "stream_restore"):
        airflow_stack.unpause(dag_id, token)
    with job_page_in_chromium(airflow_stack, token, home) as page:
        # A person upgrades to a version that fails, cold, through the job page's form; the upgrade rolls back.
        cold = page.act("upgrade", {"new_version": "3", "application": str(APPS / "broken_version.py")},
                        select={"mode": "cold"})
        assert cold["run"]["state"] == "failed" and cold["tasks"]["upgrade.submit_new_version"] == "failed", cold
        for step in ("rollback_stop_new_version", "rollback_restore_savepoint", "rollback_submit_previous_version"):
            assert cold["tasks"][f"upgrade.{step}"] == "success", (step, cold["tasks"])
        assert (JobHome(home).spec()["version"], JobHome(home).status()["state"]) == ("2", "RUNNING")
        # What the new version's failure says: what the status shows, then the driver's own error, quoted.
        said = _task_log(airflow_stack, "stream_upgrade", cold["run"]["dag_run_id"], "upgrade.submit_new_version")
        assert ("exited before the job reported RUNNING; the job's status still shows STOPPED, a previous driver's"
                in said)
        if not _resumed_task_failed_by_the_scheduler(airflow_stack, cold["run"]["dag_run_id"],
                                                     "upgrade.submit_new_version"):
            assert "the driver's error: broken version: a dependency this build needs is missing" in said
            failure = said.split("did not become healthy: ", 1)[1].split("\\n--- end of ", 1)[0]
            assert "the status is from an earlier run" not in failure, failure  # said while it waited

        upgraded["feeder"].stop()
        # A reset planned while the job runs says it would be refused; nothing is triggered by a plan.
        plan = page.plan_reset({"strategy": "to-datetime", "value": "2026-01-01T00:00:00Z"})
        assert "refused while it runs" in plan["warning"] and upgraded["topic"] in plan["changes"], plan
        stopped = page.act("stop", {})  # "with a savepoint" is ticked by default
        assert stopped["tasks"] == {"stop": "success"}, stopped
        savepoint = page.first_option("restore", "savepoint_id")  # the newest: the stop's
        plan = page.plan_reset({"strategy": "to-datetime", "value": "2026-01-01T00:00:00Z"})
        assert not plan["warning"] and f"{upgraded['topic']}:0 from " in plan["changes"], plan
        reset = page.confirm_reset()
        assert reset["tasks"] == {"reset": "success"}, reset
        restored = page.act("restore", {}, select={"savepoint_id": savepoint}, untick=("start",))
        assert restored["tasks"] == {"restore": "success", "start": "skipped"}, restored
        assert JobHome(home).history()[-1]["args"]["savepoint"] == savepoint
        # The job's history says what each did, and the page shows each run with what its operation recorded.
        by_run = {r.get("airflow", {}).get("run_id"): r for r in JobHome(home).history()}
        for run, operation in ((stopped, "stop"), (reset, "reset"), (restored, "restore")):
            record = by_run[run["run"]["dag_run_id"]]
            assert (record["operation"], record["result"]) == (operation, "ok"), record
            assert f"{operation}: ok" in page.runs_text(), page.runs_text()
        assert JobHome(home).status()["state"] == "STOPPED"
    # A user Airflow lets read but not trigger sees the job and no action, and the action routes refuse them.
    viewer = airflow_stack.token(VIEWER)
    _status, shown = airflow_stack.request("GET", f"/stream-jobs/?home={quote(home, safe='')}", token=viewer)
    assert "job-home" in shown and 'class="action' not in shown and "Take a savepoint now" not in shown
    for action in ("stop", "upgrade", "reset", "restore", "resume", "reset-plan"):
        status, _body = airflow_stack.request("POST", f"/stream-jobs/{action}?home={quote(home, safe='')}", {},
                                              token=viewer)
        assert status == 403, (action, status)

    page = f"/stream-jobs/?home={quote(home, safe='')}"
    runs = [upgraded["submit"], upgraded["upgrade"], cold, stopped, reset, restored, upgraded.get("watchdog")]
    checked: dict[str, set[str]] = {}
    for run in [r["run"] for r in runs if r] + [upgraded["verify"]]:
        dag_id, run_id = run["dag_id"], run["dag_run_id"]
        for task_id, ti in airflow_stack.task_instances(dag_id, run_id, token).items():
            if not ti["try_number"]:  # skipped by the scheduler (a rollback not needed): it never ran
                continue
            if task_id == "upgrade_unless_check_only":  # the DAG's branch on its check_only param: no job operation
                continue
            status, links = airflow_stack.request(
                "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/links", token=token)
            assert status == 200 and links["extra_links"] == {"Stream job": page}, (dag_id, task_id, ti["state"],
                                                                                    links)
            checked.setdefault(run_id, set()).add(task_id)
    assert all(checked.get(r["dag_run_id"]) for r in [r["run"] for r in runs if r] + [upgraded["verify"]]), checked
    # The tasks the outside run found without a link: the standby, the hand-over submit and the health gate.
    standby_upgrade = checked[upgraded["upgrade"]["run"]["dag_run_id"]]
    assert {"upgrade.start_standby", "upgrade.submit_new_version", "upgrade.health_gate"} <= standby_upgrade, checked
    scheduler_log = airflow_stack.log_path("scheduler").read_text(errors="replace")
    errors = [line for line in scheduler_log.splitlines() if "_link_" in line or (
        "XCom not found" in line and "link" in line.lower())]
    if errors:
        raise StackError(f"the scheduler logged errors about links: {errors[:5]}")


def trigger_run(stack, dag_id: str, conf: dict, token: str, wait: bool = True) -> dict:
    stack.unpause(dag_id, token)
    code, body = stack.trigger(dag_id, conf, token)
    assert code == 200, body
    return stack.wait_for_run(dag_id, body["dag_run_id"], token=token) if wait else body


def supervisor_state(stack, run_id: str, token: str) -> str | None:
    return stack.task_instances("stream_supervisor", run_id, token).get("supervise", {}).get("state")


def kill(home) -> float:
    killed = time.time()
    kill_drivers(home)
    return killed


def operations(home) -> list[str]:
    return [r["operation"] for r in JobHome(str(home)).history()]


def test_a_killed_driver_is_restarted_by_the_supervisor_a_stopped_job_is_not_and_a_crash_loop_is_given_up(
        airflow_stack, upgraded, kafka_bootstrap, tmp_path):
    """Event-driven recovery: ``stream_supervisor`` is triggered once through the REST API and waits deferred in the
    triggerer. A ``kill -9`` of the driver, with nothing triggered by hand, has the job running again within
    seconds, nothing lost or duplicated; a job stopped with ``stream_stop`` is not restarted (the supervision ends);
    a job submitted with a hot standby has its killed driver taken over by the standby within seconds, the next
    standby launched by the supervisor, and when it keeps dying the failover spends the failure-rate limit (one
    restart on this stack) and the supervisor gives up on it, loudly, naming the failover. Runs after the stack's own job was stopped, on a job of its own, and after the test that wants no
    failed run: its crash loop fails a supervisor run on purpose."""
    stack = airflow_stack
    topic = create_topic(kafka_bootstrap, unique("af-supervise"), PARTITIONS)
    home, output = tmp_path / "home", tmp_path / "out"
    job = {"job_home": str(home), "topics": [topic], "group": unique("af-supervise-group"),
           "output_path": str(output)}
    status = lambda: JobHome(str(home)).status() or {}  # noqa: E731
    token = stack.token()
    feeder = Feeder(kafka_bootstrap, topic)
    feeder.start()
    try:
        assert trigger_run(stack, "stream_submit", {**job, "app_version": "1"}, token)["state"] == "success"
        supervisor = trigger_run(stack, "stream_supervisor", {"job_home": str(home)}, token, wait=False)["dag_run_id"]
        wait_for(lambda: supervisor_state(stack, supervisor, stack.token()) == "deferred", "the supervisor to defer")

        # 1. kill -9, nothing triggered: running again, committing, within the bound; restarted once.
        killed_pid = status()["pid"]
        killed = kill(home)
        wait_for(lambda: status().get("pid") != killed_pid and status().get("state") == "RUNNING"
                 and (status().get("batches_this_run") or 0) >= 1, "the supervisor's restart",
                 RECOVERY_BOUND_SECONDS)
        print(f"recovered {time.time() - killed:.1f}s after the kill")
        assert operations(home).count("watchdog-restart") == 1
        wait_for(lambda: supervisor_state(stack, supervisor, stack.token()) == "deferred", "the supervisor to defer")
    finally:
        sent = feeder.stop()
    ends = {p: high for p, (_low, high) in watermarks(kafka_bootstrap, topic, PARTITIONS).items()}
    wanted = {topic: {str(p): end for p, end in ends.items()}}
    wait_for(lambda: status().get("last_offsets") == wanted, "the restarted job to catch up")

    # 2. Stopped on purpose: the supervision ends and nothing restarts the job.
    token = stack.token()
    assert trigger_run(stack, "stream_stop", {"job_home": str(home)}, token)["state"] == "success"
    ended = stack.wait_for_run("stream_supervisor", supervisor, timeout=120, token=token)
    assert ended["state"] == "success", ended
    time.sleep(5)
    assert drivers_of(home) == [] and status()["state"] == "STOPPED"
    assert operations(home).count("watchdog-restart") == 1
    ids = output_ids(output)
    assert len(ids) == len(set(ids)), "a record written twice"
    assert set(ids) == {f"e{i}" for i in range(sent)}, "a record lost"

    # 3. A crash loop, with a hot standby: a new submit with the example DAG's Hot standby param (a new restart
    # budget; the submit launches the standby once the job runs). A kill -9 of the driver alone is taken over by
    # the standby within seconds (a failover: the one restart this stack's budget allows); the supervisor launches
    # the next hot standby; the next kill is past the budget: the standby stands down, the supervisor gives up
    # naming the failover, and the job stays down. Nothing is fed any more: the submit succeeds once the job runs.
    assert trigger_run(stack, "stream_submit", {**job, "app_version": "1", "min_batches": 0, "hot_standby": True},
                       token)["state"] == "success"
    supervisor = trigger_run(stack, "stream_supervisor", {"job_home": str(home)}, token, wait=False)["dag_run_id"]
    wait_for(lambda: supervisor_state(stack, supervisor, stack.token()) == "deferred", "the supervisor to defer")
    standby = ready_hot_standby(home)
    first_pid = status()["pid"]
    killed = kill_driver(first_pid)
    wait_for(lambda: status().get("pid") == standby["pid"] and status().get("state") == "RUNNING",
             "the hot standby's takeover", 60)
    print(f"taken over by the hot standby {time.time() - killed:.1f}s after the kill")
    assert operations(home).count("failover") == 1 and operations(home).count("watchdog-restart") == 1
    wait_for(lambda: supervisor_state(stack, supervisor, stack.token()) == "deferred", "the supervisor to defer")
    following = ready_hot_standby(home, other_than=standby["pid"])  # the supervisor's pass launched it
    kill_driver(standby["pid"])
    given_up = stack.wait_for_run("stream_supervisor", supervisor, timeout=120, token=stack.token())
    assert given_up["state"] == "failed", given_up
    record = next(r for r in reversed(JobHome(str(home)).history()) if r["operation"] == "watchdog-give-up")
    assert "crash loop" in record["error"], record
    assert "gave up: 1 restart(s) in the last 3600s (1 by the hot standby's failover)" in record["error"], record
    assert operations(home).count("failover") == 1, "past the budget, the hot standby did not take over"
    ended = JobHome(str(home)).standby_record()
    assert (ended["pid"], ended["state"]) == (following["pid"], "ENDED") and "gave up" in ended["error"], ended
    shown = job_status(JobHome(str(home)))
    assert (shown.state, shown.recorded_state) == ("GAVE_UP", "RUNNING"), shown
    time.sleep(5)
    assert drivers_of(home) == [], "a job given up on stays down, its hot standby too"


def kill_driver(pid: int) -> float:
    """``kill -9`` of one driver's process group (spark-submit, its JVM, the Python driver), not its standby's."""
    killed = time.time()
    os.killpg(os.getpgid(pid), signal.SIGKILL)
    return killed


def ready_hot_standby(home, other_than: int | None = None) -> dict:
    """The job's hot standby record once READY (and not ``other_than``'s)."""
    def ready() -> dict | None:
        record = JobHome(str(home)).standby_record() or {}
        return record if record.get("hot") and record.get("state") == "READY" and record.get("pid") != other_than \
            else None

    return wait_for(ready, "a READY hot standby", 240)


def test_no_request_to_the_stack_failed_or_hung(airflow_stack, upgraded):
    """Runs after every other test of the module: in all that the module did (two upgrades, a watchdog run, a
    stop, a reset, refusals, the job page in a browser) no request to either api-server answered 5xx or took
    over 30 s. On one api-server over SQLite, a trigger hung for 60 s and failed while a task started."""
    troubled = airflow_stack.troubled_requests(slower_than_seconds=30)
    assert not troubled, troubled[:5]


#: The asset job's event times: three hours of a past day, one event every five minutes.
ASSET_BASE = datetime(2026, 11, 30, 6, tzinfo=UTC)


def send_event_minutes(bootstrap: str, topic: str, minutes) -> int:
    """Events with ids ``a<minute>`` whose event time (``ts``) is ``ASSET_BASE`` plus that many minutes."""
    return produce(bootstrap, topic, [(f"k{m % 4}", json.dumps({
        "id": f"a{m}", "key": f"k{m % 4}", "ts": (ASSET_BASE + timedelta(minutes=m)).isoformat(), "amount": 1.0}))
        for m in minutes])


def read_through(home: Path, records: int, timeout: float = 180.0) -> None:
    """Wait until the job's driver has read and committed ``records`` records."""
    def done() -> bool:
        return ((JobHome(str(home)).status() or {}).get("records_this_run") or 0) >= records

    wait_for(done, f"{records} records committed by the job in {home}", timeout)


def test_a_downstream_dag_runs_once_per_complete_hour_of_the_jobs_output(airflow_stack, asset_job, kafka_bootstrap):
    """The job declares its output as the asset ``stream_output_hourly`` is scheduled on; its events' times span
    three hours (06:00 to 08:50) and its watermark trails the newest by ten minutes, so 06:00 and 07:00 are complete
    and 08:00 is not: the downstream DAG runs once for each complete hour, with that hour's events in the output,
    and never for 08:00."""
    from airflow_kafka_stream.devstack.airflow_stack import ANNOUNCER, wait_for_dags

    token = airflow_stack.token()
    home, output, topic = Path(asset_job["job_home"]), Path(asset_job["output_path"]), asset_job["topics"][0]
    wait_for_dags(airflow_stack, ["stream_output_hourly"])
    airflow_stack.unpause("stream_output_hourly", token)
    send_event_minutes(kafka_bootstrap, topic, range(0, 60, 5))  # 06:00-06:55
    try:
        submitted = trigger_run(airflow_stack, "stream_submit", {**asset_job, "app_version": "1"}, token)
        assert submitted["state"] == "success", airflow_stack.task_instances("stream_submit", submitted["dag_run_id"],
                                                                            token)
        sent = 12
        read_through(home, sent)
        # A batch runs with the watermark of the batches before it: each send is read before the next is sent, and
        # the last (08:52) is read by a batch that runs with every earlier event's watermark (08:40).
        for minutes in (range(60, 120, 5), range(120, 175, 5), [172]):  # 07:00-07:55, 08:00-08:50, 08:52
            sent += send_event_minutes(kafka_bootstrap, topic, minutes)
            read_through(home, sent)

        def hourly_runs(ended_only: bool = True) -> list[dict]:
            _status, runs = airflow_stack.request("GET", "/api/v2/dags/stream_output_hourly/dagRuns", token=token)
            return [run for run in runs["dag_runs"] if not ended_only or run["state"] in ("success", "failed")]

        wait_for(lambda: len(hourly_runs()) >= 2, "stream_output_hourly runs for the two complete hours")
        # The status shows the announcements at the driver's next heartbeat (every 5 s).
        wait_for(lambda: (JobHome(str(home)).status() or {}).get("assets", {}).get("announced_through")
                 == "2026-11-30T08:00:00+00:00", "the status to show both hours announced", 30)
        status = JobHome(str(home)).status()
        assert status["assets"]["error"] is None and status["assets"]["waiting"] == 0, status["assets"]
        time.sleep(10)  # a run for 08:00 would have been created by now
        runs = hourly_runs(ended_only=False)
        assert sorted(run["partition_key"] for run in runs) == ["2026-11-30T06", "2026-11-30T07"], runs
        assert {run["state"] for run in runs} == {"success"}, runs
        for hour in ("06", "07"):
            summary = json.loads((output / "hourly" / f"2026-11-30T{hour}.json").read_text())
            assert (summary["events"], summary["amount"]) == (12, 12.0), summary
        # The events came from the job's driver, through the stack's connection (its op user), with the window.
        _status, assets = airflow_stack.request("GET", f"/api/v2/assets?uri_pattern={quote(asset_job['output_asset'])}",
                                                token=token)
        asset_id = assets["assets"][0]["id"]
        _status, events = airflow_stack.request("GET", f"/api/v2/assets/events?asset_id={asset_id}", token=token)
        keys = sorted(event["partition_key"] for event in events["asset_events"])
        assert keys == ["2026-11-30T06:00:00", "2026-11-30T07:00:00"], events
        extra = events["asset_events"][0]["extra"]
        assert extra["job"] == "home" and extra["window_end"].startswith("2026-11-30T0"), extra
        assert airflow_stack.password(ANNOUNCER) not in (home / "status.json").read_text()
    finally:
        _stop(home)
