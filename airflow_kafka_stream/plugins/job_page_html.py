"""The job page as HTML: rendered on the server from :func:`job_view` data, no script, an inline SVG lag plot.

Every value is escaped; the page loads nothing from elsewhere, so it works
inside the Airflow UI's iframe and behind any proxy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, tzinfo
from html import escape
from typing import Any

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.liveness import DEAD, GAVE_UP
from airflow_kafka_stream.plugins.actions_html import operate_section
from airflow_kafka_stream.plugins.objective_html import objective_limit, objective_section
from airflow_kafka_stream.plugins.state_html import savepoint_actions, state_section
from airflow_kafka_stream.plugins.svg_plot import PlotFrame
from airflow_kafka_stream.plugins.time_lag_plot import seconds_text, time_lag_plot
from airflow_kafka_stream.render.job import standby_text

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:16px;color:#1a202c;font-size:14px}
h1{font-size:20px;margin:0 0 12px} h2{font-size:17px;margin:24px 0 6px} h3{font-size:14px;margin:16px 0 6px}
table{border-collapse:collapse;margin:4px 0 8px} th,td{border:1px solid #cbd5e0;padding:3px 8px;text-align:left}
th{background:#edf2f7} td.num{text-align:right;font-variant-numeric:tabular-nums}
.job{border-top:2px solid #2b6cb0;padding-top:4px} .muted{color:#718096} .error{color:#c53030}
.OK{color:#276749;font-weight:600} .bad{color:#c53030;font-weight:600} .warn{color:#b7791f;font-weight:600}
svg text{font-size:11px;fill:#4a5568} .plots{display:flex;flex-wrap:wrap;gap:24px}
form.action{margin:4px 0;padding:4px 0;border-bottom:1px dashed #e2e8f0} form.action label{margin-right:8px}
pre.plan{background:#f7fafc;padding:8px;overflow-x:auto}
"""

#: Partition statuses (verify's) and the job state that are shown as bad.
BAD_STATUSES = {"PARTITION_GONE", "OUT_OF_RANGE", "STALLED", JobState.FAILED}


def page(title: str, views: Sequence[dict[str, Any]], intro: str = "", tz: tzinfo = UTC,
         now: datetime | None = None, refresh_seconds: int | None = None, body: str = "") -> str:
    """The whole page for several job homes (or a ``body`` of its own: a reset's plan); times shown to the second
    in ``tz`` with their age at ``now``; ``refresh_seconds`` reloads it (while a run it shows goes on)."""
    clock = Clock(tz, now or datetime.now(UTC))
    parts = [f"<h1>{escape(title)}</h1>"]
    if intro:
        parts.append(f'<p class="muted">{escape(intro)}</p>')
    if body:
        parts.append(body)
    elif not views:
        parts.append('<p id="no-jobs">No job home known here. Job homes come from the <code>[airflow_kafka_stream] '
                     "job_homes</code> setting and from the <code>job_home</code> of the example DAGs' runs.</p>")
    parts += [job_section(view, clock) for view in views]
    refresh = f'<meta http-equiv="refresh" content="{int(refresh_seconds)}">' if refresh_seconds else ""
    return ("<!doctype html><html><head><meta charset=\"utf-8\">" + refresh + "<title>" + escape(title)
            + "</title><style>" + STYLE
            + "</style></head><body>" + "\n".join(parts) + "</body></html>")


class Clock:
    """How the page writes a time a person reads: to the second, in the Airflow UI's zone, with its age."""

    def __init__(self, tz: tzinfo, now: datetime) -> None:
        self.tz, self.now = tz, now

    def when(self, value: str | None) -> str | None:
        """``2026-11-22 11:15:00 CET (3 min ago)`` from an ISO time; a value that is no time as it is."""
        if not value:
            return None
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            return str(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)  # the job home writes UTC
        local = moment.astimezone(self.tz)
        return f"{local.strftime('%Y-%m-%d %H:%M:%S')} {local.tzname() or ''}".rstrip() + f" ({age(self.now, moment)})"

    def cell(self, value: str | None) -> str:
        """A table cell with the readable time, the exact value on hover."""
        text = self.when(value)
        if text is None:
            return _cell(None)
        return f'<td title="{escape(str(value))}">{escape(text)}</td>'


def age(now: datetime, moment: datetime) -> str:
    """How long ago, in the largest whole unit: ``12 s ago``, ``3 min ago``, ``5 h ago``, ``2 days ago``."""
    seconds = (now - moment).total_seconds()
    if seconds < 0:
        return "in the future: clocks differ" if seconds < -5 else "just now"
    for size, unit in ((86400, "days"), (3600, "h"), (60, "min")):
        if seconds >= size * (2 if unit == "days" else 1):
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def job_section(view: dict[str, Any], clock: Clock | None = None) -> str:
    clock = clock or Clock(UTC, datetime.now(UTC))
    summary = view.get("summary") or {}
    name = summary.get("job") or view["job_home"]
    parts = [f'<section class="job" data-job-home="{escape(view["job_home"])}">',
             f"<h2>{escape(str(name))}</h2>", f'<p class="muted">job home {escape(view["job_home"])}</p>']
    parts += [f'<p class="error">{escape(section)}: {escape(text)}</p>' for section, text in view["errors"].items()]
    if summary:
        parts.append(_summary(summary))
    if view.get("partitions") is not None:
        parts.append("<h3>Partitions</h3>" + _partitions(view["partitions"]))
    if view.get("group") is not None:
        parts.append("<h3>Consumer group members</h3>" + _group_members(view["group"]))
    if "lag_samples" in view:
        parts.append('<h3>Lag over time</h3><div class="plots"><div>' + lag_plot(view["lag_samples"], tz=clock.tz)
                     + "</div><div>" + time_lag_plot(view.get("time_lag_samples") or [], tz=clock.tz,
                                                     limit=objective_limit(view.get("objective")))
                     + "</div></div>" + objective_section(view.get("objective"), clock))
    if view.get("state") is not None:
        parts.append("<h3>State</h3>" + state_section(view["state"]))
    operate = view.get("operate")  # the page's (not the JSON's): what this user may trigger, this job's runs
    if operate is not None:
        parts.append(operate_section(view["job_home"], operate["allowed"], summary.get("state"),
                                     view.get("savepoints") or [], operate["runs"]))
    if view.get("savepoints") is not None:
        may_take = operate is None or "savepoint" in operate["allowed"]
        parts.append("<h3>Savepoints</h3>" + (savepoint_actions(view["job_home"]) if may_take else "")
                     + _savepoints(view["savepoints"], clock))
    if view.get("history") is not None:
        parts.append("<h3>Operation history</h3>" + _history(view["history"], clock))
    parts.append("</section>")
    return "\n".join(parts)


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]], css: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(rows_cells) + "</tr>" for rows_cells in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cell(value: Any, num: bool = False, css: str = "") -> str:
    text = "—" if value is None else str(value)
    classes = " ".join(c for c in ("num" if num else "", css) if c)
    return f'<td class="{classes}">{escape(text)}</td>' if classes else f"<td>{escape(text)}</td>"


def _summary(s: dict[str, Any]) -> str:
    age = s.get("heartbeat_age_seconds")
    state_css = "bad" if s.get("state") in BAD_STATUSES or s.get("state") in (DEAD, GAVE_UP) else (
        "OK" if s.get("state") == JobState.RUNNING else "")
    state = s.get("state")
    if state in (DEAD, GAVE_UP):  # the driver's own word, and why it no longer holds
        state = f"{state} (its last status says {s.get('recorded_state')}): {s.get('state_reason')}"
    rows = [("State", _cell(state, css=state_css)),
            ("Application version", _cell(s.get("app_version"))),
            ("Heartbeat age", _cell(f"{age:.1f} s" if age is not None else None)),
            ("Generation", _cell(s.get("generation"))),
            ("Last committed batch", _cell(s.get("last_batch_id"))),
            ("Consumer group", _cell(s.get("group"))),
            ("Topics", _cell(", ".join(s.get("topics") or []) or None)),
            ("Where batches are read", _cell(s.get("read_placement")))]
    if s.get("time_lag_seconds") is not None:
        rows.append(("Time lag (oldest unprocessed record)", _cell(seconds_text(s["time_lag_seconds"]))))
    if s.get("standby"):
        standby = s["standby"]
        rows.append(("Hot standby" if standby.get("hot") else "Standby",
                     _cell(standby_text(standby), css="OK" if standby.get("state") == "READY" else ("bad" if standby.get("state") == "NONE"
                                                                             else ""))))
    rows += _output_rows(s)
    if s.get("error"):
        rows.append(("Error", _cell(s["error"], css="bad")))
    if (s.get("metrics") or {}).get("failing"):
        rows.append(("Metrics", _cell(f"failing: {s['metrics'].get('last_error')}", css="bad")))
    return '<table class="summary"><tbody>' + "".join(
        f"<tr><th>{escape(k)}</th>{v}</tr>" for k, v in rows) + "</tbody></table>"


def _output_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The sink, the Kafka sink's last committed batch and transactions, the output asset's announced windows."""
    rows = [("Sink", _cell(s["sink"]))] if s.get("sink") else []
    kafka = s.get("kafka_sink")
    if kafka:
        last = kafka.get("last_committed") or {}
        counts = kafka.get("transactions") or {}
        text = (f"last committed batch {last.get('batch_id')} (generation {last.get('generation')})" if last else
                "no batch committed yet") + "; transactions this run: " + ", ".join(
            f"{counts.get(k, 0)} {k}" for k in ("committed", "aborted", "fenced", "skipped")) + (
            f"; skips replays ({kafka.get('replays_skipped_this_run') or 0} replayed record(s) skipped this run)"
            if kafka.get("skip_replays") else "")
        rows.append(("Kafka sink", _cell(text, css="bad" if counts.get("fenced") else "")))
    assets = s.get("assets")
    if assets:
        text = (f"{assets.get('uri')}: announced through {assets.get('announced_through') or 'nothing yet'}, "
                f"{assets.get('waiting')} window(s) waiting" + (f"; {assets['error']}" if assets.get("error") else ""))
        rows.append(("Output asset", _cell(text, css="bad" if assets.get("error") else "")))
    return rows


def _partitions(rows: list[dict[str, Any]]) -> str:
    def status_css(status: str) -> str:
        return "OK" if status == "OK" else "bad" if status in BAD_STATUSES else "warn"

    return _table(
        ["Topic", "Partition", "Checkpoint offset", "Group offset", "Low watermark", "High watermark", "Lag",
         "Time lag", "Verify"],
        ([_cell(r["topic"]), _cell(r["partition"], True), _cell(r["checkpoint_offset"], True),
          _cell(r["group_offset"], True), _cell(r["low"], True), _cell(r["high"], True), _cell(r["lag"], True),
          _cell(None if r.get("time_lag_seconds") is None else seconds_text(r["time_lag_seconds"]), True),
          f'<td class="{status_css(r["status"])}" title="{escape(r.get("detail") or "")}">{escape(r["status"])}</td>']
         for r in rows), "partitions")


def _group_members(group: dict[str, Any]) -> str:
    """The group's state and members; the job never joins its group, so a member is another consumer (shown bad)."""
    head = (f'<p>Group {escape(group["group"])}: {escape(group["state"])} ({escape(group["protocol"])} protocol). '
            "The job never joins its group: ")
    if not group["members"]:
        return head + "no other consumer uses it.</p>"
    return head + ('<span class="bad">these consumers use its group id; an offset reset or restore is refused '
                   "while they do.</span></p>") + _table(
        ["Client id", "Host", "Member id", "Static instance id", "Assigned partitions"],
        ([_cell(m["client_id"], css="bad"), _cell(m["host"]), _cell(m["member_id"]), _cell(m["group_instance_id"]),
          _cell(", ".join(m["assignment"]) or None)] for m in group["members"]), "members")


def _size(size: int | None) -> str | None:
    if size is None:
        return None
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return None


def _savepoints(rows: list[dict[str, Any]], clock: Clock) -> str:
    if not rows:
        return '<p class="muted">No savepoint yet.</p>'

    def valid(r: dict[str, Any]) -> str:
        if r["valid"] is None:
            return _cell("not checked", css="muted")
        if r["valid"]:
            return _cell("valid", css="OK")
        return f'<td class="bad" title="{escape(r.get("problem") or "")}">INVALID</td>'

    return _table(["Savepoint", "Batch", "Created", "Version", "Size", "Checksums"],
                  ([_cell(r["id"]), _cell(r["batch_id"], True), clock.cell(r["created_at"]), _cell(r["app_version"]),
                    _cell(_size(r["size_bytes"]), True), valid(r)] for r in rows), "savepoints")


def _history(rows: list[dict[str, Any]], clock: Clock) -> str:
    if not rows:
        return '<p class="muted">No operation recorded yet.</p>'
    return _table(["Started", "Operation", "By", "Result", "Seconds", "Arguments", "Error"],
                  ([clock.cell(r["started_at"]), _cell(r["operation"]), _cell(r["by"]),
                    _cell(r["result"], css="OK" if r["result"] == "ok" else "bad"), _cell(r["seconds"], True),
                    _cell(r["args"]), _cell((r.get("error") or "")[:300] or None)] for r in rows), "history")


def lag_plot(samples: Sequence[Sequence[float]], width: int = 640, height: int = 160, tz: tzinfo = UTC) -> str:
    """Records waiting per batch over time, as an SVG polyline with its range labelled in ``tz`` (newest value in
    text)."""
    if not samples:
        return '<p class="muted">No lag sample yet (the running job records one per batch).</p>'
    times = [float(s[0]) for s in samples]
    lags = [float(s[2]) for s in samples]
    peak = max(max(lags), 1.0)
    frame = PlotFrame(times, lags, peak, width, height, tz)
    return (
        f'<p class="lag-now">Lag at the last batch: <b>{int(lags[-1])}</b> records (peak {int(peak)}, '
        f"{len(samples)} batches)</p>"
        + frame.svg("lag-plot", "records waiting per batch", str(int(peak)), "0", "#2b6cb0")
    )
