"""The job page's lag objective: the objective the job is held to, its last check and the breaches recorded.

The seconds plot (``time_lag_plot``) draws the objective as its limit line and marks the measurements above it;
this adds the objective in words and the history's ``objective-breach`` records, newest first.
"""

from __future__ import annotations

from html import escape
from typing import Any

#: Breaches listed, newest first.
BREACH_ROWS = 10


def objective_limit(objective: dict[str, Any] | None) -> float | None:
    """The seconds plot's limit line: the objective's ``max_lag_seconds``, None without an objective."""
    return (objective or {}).get("max_lag_seconds")


def objective_section(objective: dict[str, Any] | None, clock: Any) -> str:
    """The objective line, the last check and the breaches (``job_view.objective``'s data)."""
    if not objective:
        return ('<p class="muted objective">No lag objective recorded (a StreamLagObjectiveSensor, or the '
                "watchdog DAG's objective Params, record one).</p>")
    last = objective.get("last_check") or {}
    verdict = last.get("verdict")
    css = "bad" if verdict == "breach" else "warn" if verdict in ("above", "unmeasured") else "OK" if verdict else ""
    line = (f'<p class="objective">Lag objective: time lag at most <b>{objective["max_lag_seconds"]:g} s</b>, '
            f"above it for at most {objective['for_seconds']:g} s"
            + (f' — last check <span class="{css}">{escape(str(verdict))}</span>'
               f" {escape(clock.when(last.get('at')) or '')}" if verdict else "") + "</p>")
    breaches = list(reversed(objective.get("breaches") or []))[:BREACH_ROWS]
    if not breaches:
        return line + '<p class="muted">No breach recorded.</p>'
    rows = "".join(f'<tr class="breach">{clock.cell(b.get("at"))}<td class="num bad">'
                   f'{escape("—" if b.get("max_seconds") is None else format(b["max_seconds"], "g") + " s")}</td>'
                   f'<td>{escape((b.get("message") or "")[:300])}</td></tr>' for b in breaches)
    return (line + '<table class="breaches"><thead><tr><th>Breach</th><th>Time lag</th><th>Partitions</th></tr>'
            f"</thead><tbody>{rows}</tbody></table>")
