"""The job page's "State" section (what the checkpoint's state holds) and its savepoint action.

The state is ``checkpoint state``'s list (``ops.inspect.state``): one row per
store (per state variable for transformWithState) with the operator, the
partitions, the versions present and the key and value schema; a file that
could not be read is said on its operator's row. The action is a form that asks
the plugin to trigger the ``stream_savepoint`` DAG for this job home (see
``job_page.take_savepoint``), beside a link to that DAG's runs.
"""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

#: The DAG the page's savepoint button triggers (dags/stream_savepoint.py).
SAVEPOINT_DAG = "stream_savepoint"


def state_section(state: dict[str, Any]) -> str:
    """The State table, or why there is none (stateless, a generation not started yet)."""
    if state.get("note"):
        return f'<p class="muted state">{escape(state["note"])}</p>'
    if not state.get("stateful"):
        return '<p class="muted state">Stateless: no state/ directory in the checkpoint.</p>'
    rows = []
    for op in state.get("operators") or []:
        rows += _operator_rows(op)
    head = "".join(f"<th>{escape(h)}</th>" for h in ("Operator", "Store", "Partitions", "Versions",
                                                      "State variable", "Key schema", "Value schema"))
    return f'<table class="state"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _operator_rows(op: dict[str, Any]) -> list[str]:
    name = f"{op['operator_id']} {op.get('name') or '(name unknown)'}"
    versions = (f"{op['first_version']}..{op['last_version']}" if op.get("first_version") is not None
                else "none")
    problems = list(op.get("problems") or [])
    rows = []
    for store in op.get("stores") or [{"name": "—", "partitions": None, "column_families": []}]:
        if store.get("problem"):
            problems.append(f"store {store['name']}: {store['problem']}")
        families = [f for f in store.get("column_families") or [] if not f["name"].startswith("$")] or [None]
        for family in families:
            variable = family["name"] if family and family["name"] != "default" else ""
            cells = [name, store["name"], store.get("partitions"), versions, variable,
                     family["key_schema"] if family else None, family["value_schema"] if family else None]
            rows.append("<tr>" + "".join(_cell(c, num=i in (2, 3)) for i, c in enumerate(cells)) + "</tr>")
    rows += [f'<tr><td class="bad" colspan="7">operator {op["operator_id"]}: {escape(p)}</td></tr>'
             for p in problems]
    return rows


def _cell(value: Any, num: bool = False) -> str:
    text = "—" if value is None else str(value)
    return f'<td class="num">{escape(text)}</td>' if num else f"<td>{escape(text)}</td>"


def savepoint_actions(job_home: str) -> str:
    """A button that triggers the savepoint DAG for this job home, and a link to that DAG's runs.

    Both open in the whole window (``target=_top``): the page sits in an iframe of the Airflow UI. The paths
    are relative to the page (``/stream-jobs/``), so they hold under any base URL.
    """
    action = f"savepoint?home={quote(job_home, safe='')}"
    return (f'<form class="savepoint-now" method="post" action="{escape(action)}" target="_top">'
            '<button type="submit">Take a savepoint now</button> '
            f'<span class="muted">(triggers the <a href="../dags/{SAVEPOINT_DAG}" target="_top">{SAVEPOINT_DAG}'
            "</a> DAG; live while the job runs, the job keeps running)</span></form>")
