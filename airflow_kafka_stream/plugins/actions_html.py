"""The job page's "Operate" section: a form per action the user may trigger, this job's runs of them, and the
page that shows a reset's plan before it can be confirmed.

Forms post to the plugin (``job_page``), which triggers the action's example DAG and comes back here; a run's
link opens it in the whole window (``target=_top``: the page sits in an iframe of the Airflow UI). Paths are
relative to the page (``/stream-jobs/``), so they hold under any base URL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from airflow_kafka_stream.core.reset_strategy import StrategyKind
from airflow_kafka_stream.plugins.job_actions import ACTIONS, CONFIRM, ResetChoice

#: Run states of Airflow in which a run has not ended: the page refreshes itself while one is shown.
ACTIVE_STATES = ("queued", "running")
#: States in which the job may be started again by hand (its driver is not alive).
RESUMABLE = ("GAVE_UP", "DEAD", "FAILED", "STOPPED")


def _form(action: str, home: str, body: str, css: str = "") -> str:
    target = f"{action}?home={quote(home, safe='')}"
    return (f'<form class="action {escape(css or action)}" method="post" action="{escape(target)}">{body}'
            "</form>")


def _check(name: str, label: str, on: bool = False) -> str:
    return f'<label><input type="checkbox" name="{name}"{" checked" if on else ""}> {escape(label)}</label>'


def _field(name: str, label: str, value: str = "", required: bool = False) -> str:
    return (f'<label>{escape(label)} <input type="text" name="{name}" value="{escape(value)}"'
            f'{" required" if required else ""}></label>')


def _button(action: str) -> str:
    return f'<button type="submit">{escape(ACTIONS[action].label)}</button>'


def operate_section(home: str, allowed: Iterable[str], state: str | None, savepoints: Sequence[Mapping[str, Any]],
                    runs: Sequence[Mapping[str, Any]]) -> str:
    """The forms of the actions in ``allowed`` (none for a user who may trigger none), and this job's runs."""
    allowed = set(allowed)
    forms = []
    if "stop" in allowed and state == "GAVE_UP":  # stopping it is the acknowledgement: it stays down (ops.stop)
        forms.append(_form("stop", home, _check("savepoint", "with a savepoint") + " "
                           + '<button type="submit">Acknowledge: keep it stopped</button>'
                           + '<span class="muted"> recovery leaves it alone until it is started again</span>'))
    elif "stop" in allowed:
        forms.append(_form("stop", home, _check("savepoint", "with a savepoint", on=True) + " " + _button("stop")))
    if "upgrade" in allowed:
        forms.append(_form("upgrade", home, _field("new_version", "version", required=True) + " "
                           + _field("application", "application (empty: the running one's)") + " "
                           + '<select name="mode"><option value="standby" selected>warm standby</option>'
                             '<option value="cold">cold (stop, then start)</option></select> '
                           + _check("check_only", "check only") + " " + _button("upgrade")))
    if "reset" in allowed:
        options = "".join(f'<option value="{k.value}">{k.value}</option>' for k in StrategyKind.choices())
        forms.append(_form("reset-plan", home, f'<select name="strategy">{options}</select> '
                           + _field("value", "value (date-time, offset, shift, duration, savepoint)") + " "
                           + _field("topics", "topics (empty: all)") + " " + _check("drop_state", "drop state")
                           + ' <button type="submit">Plan the reset</button>', css="reset"))
    if "restore" in allowed and savepoints:
        choices = "".join(f'<option value="{escape(str(s["id"]))}">{escape(str(s["id"]))} (batch '
                          f'{escape(str(s.get("batch_id")))}, version {escape(str(s.get("app_version")))})</option>'
                          for s in savepoints)
        forms.append(_form("restore", home, f'<select name="savepoint_id">{choices}</select> '
                           + _check("drop_state", "drop state") + " " + _check("start", "start it", on=True) + " "
                           + _button("restore")))
    if "resume" in allowed and state in RESUMABLE:
        note = " (recovery gave up: a person looked)" if state == "GAVE_UP" else ""
        forms.append(_form("resume", home, _button("resume") + f'<span class="muted"> as last submitted{note}'
                                                                  "</span>"))
    if not forms and not runs:
        return ""
    intro = ('<p class="muted">Each action triggers its example DAG for this job home; the operation itself '
             "refuses what it must (the job runs, the lock is held), and its run below says so.</p>")
    return "<h3>Operate</h3>" + (intro + "".join(forms) if forms else "") + runs_table(runs)


def runs_table(runs: Sequence[Mapping[str, Any]]) -> str:
    """This job's newest runs of the action DAGs: state, link to the run, and what its operations said."""
    if not runs:
        return ""
    rows = []
    for run in runs:
        link = f"../dags/{quote(run['dag_id'])}/runs/{quote(run['run_id'], safe='')}"
        said = "; ".join(f"{o['operation']}: {o['result']}" + (f" ({o['error']})" if o.get("error") else "")
                         for o in run.get("outcome") or [])
        rows.append(f'<tr class="run {escape(str(run["state"]))}"><td>{escape(run["dag_id"])}</td>'
                    f'<td><a href="{escape(link)}" target="_top">{escape(run["run_id"])}</a></td>'
                    f'<td>{escape(str(run["state"]))}</td><td>{escape(str(run.get("by") or ""))}</td>'
                    f"<td>{escape(said)}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("DAG", "Run", "State", "By", "What the operation said"))
    return f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def refreshing(runs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a shown run has not ended (the page then reloads itself to show its progress)."""
    return any(str(run.get("state")) in ACTIVE_STATES for run in runs)


def reset_confirmation(home: str, choice: ResetChoice, plan: Mapping[str, Any], plan_text: str,
                       job_state: str | None) -> str:
    """The dry run's plan, what executing it changes, and the confirm button that sends exactly this choice."""
    changes = [p for p in plan.get("partitions") or [] if p.get("in_scope") and p.get("target") is not None
               and p.get("target") != p.get("checkpoint_offset")]
    lines = "".join(f"<li>{escape(p['topic'])}:{p['partition']} from {p.get('checkpoint_offset')} to "
                    f"{p['target']}</li>" for p in changes)
    named = (f"<p>Executing moves the checkpoint and the consumer group of {escape(home)} together:</p>"
             f'<ul class="changes">{lines}</ul>' if changes else
             '<p class="changes">Nothing would change: every partition is already there.</p>')
    if choice.drop_state:
        named += "<p>It starts a new checkpoint generation without the operator state.</p>"
    warning = ""
    if job_state in ("RUNNING", "DRAINING", "STARTING"):
        warning = (f'<p class="error">The job is {escape(job_state)}: the reset will be refused while it runs; '
                   "stop it first.</p>")
    hidden = "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">'
                     for k, v in {**choice.fields(), "confirm": CONFIRM}.items())
    confirm = _form("reset", home, hidden + f'<button type="submit">Execute this reset ({len(changes)} '
                    "partition(s) change)</button>") if changes else ""
    back = f'<p><a href="./?home={quote(home, safe="")}">Back to the job</a></p>'
    return (f'<h2>Reset plan for {escape(home)}</h2><p class="muted">A dry run: nothing has changed. The run that '
            "executes plans again at its own moment and logs that plan.</p>"
            f'<pre class="plan">{escape(plan_text)}</pre>{warning}{named}{confirm}{back}')
