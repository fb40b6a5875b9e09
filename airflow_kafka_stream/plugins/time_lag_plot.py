"""The job page's seconds plot: the job's time lag (the oldest unprocessed record's age) over time, inline SVG.

It sits beside the records plot (``job_page_html.lag_plot``): records waiting mean little without the
topic's rate, seconds do. The samples are the driver's ``time_lag_samples`` ([epoch, max seconds], one
per measurement, at most one a heartbeat interval). ``limit`` (seconds), when given, is drawn as a dashed
line and the samples above it are marked: where a lag objective shows its breaches.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo


def seconds_text(seconds: float) -> str:
    """``12.3 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def time_lag_plot(samples: Sequence[Sequence[float]], width: int = 640, height: int = 160, tz: tzinfo = UTC,
                  limit: float | None = None) -> str:
    """The max time lag per measurement as an SVG polyline, its range labelled in ``tz``, the newest value in text."""
    if not samples:
        return ('<p class="muted time-lag-now">No time lag measured yet (the running job measures it once a '
                "heartbeat interval).</p>")
    times = [float(s[0]) for s in samples]
    values = [max(float(s[1]), 0.0) for s in samples]
    left, right, top, bottom = 56, 8, 8, 22
    span_t = max(times[-1] - times[0], 1.0)
    peak = max(max(values), limit or 0.0, 1.0)

    def x(t: float) -> float:
        return left + (t - times[0]) / span_t * (width - left - right)

    def y(v: float) -> float:
        return top + (1 - v / peak) * (height - top - bottom)

    points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in zip(times, values, strict=True))
    start = datetime.fromtimestamp(times[0], tz).strftime("%H:%M:%S")
    last = datetime.fromtimestamp(times[-1], tz)
    end, zone = last.strftime("%H:%M:%S"), last.tzname() or ""
    marks = ""
    if limit is not None:
        marks = (f'<line class="limit" x1="{left}" y1="{y(limit):.1f}" x2="{width - right}" y2="{y(limit):.1f}" '
                 'stroke="#c53030" stroke-dasharray="4 3"/>'
                 + "".join(f'<circle class="breach" cx="{x(t):.1f}" cy="{y(v):.1f}" r="3" fill="#c53030"/>'
                           for t, v in zip(times, values, strict=True) if v > limit))
    return (
        f'<p class="time-lag-now">Time lag at the last measurement: <b>{seconds_text(values[-1])}</b> (peak '
        f"{seconds_text(max(values))}, {len(samples)} measurements)</p>"
        f'<svg class="time-lag-plot" width="{width}" height="{height}" role="img" '
        f'aria-label="oldest unprocessed record age in seconds from {start} to {end} {zone}">'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#a0aec0"/>'
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="#a0aec0"/>'
        f'<text x="{left - 4}" y="{top + 10}" text-anchor="end">{peak:.0f} s</text>'
        f'<text x="{left - 4}" y="{height - bottom}" text-anchor="end">0 s</text>'
        f'<text x="{left}" y="{height - 6}">{start}</text>'
        f'<text x="{width - right}" y="{height - 6}" text-anchor="end">{end} {zone}</text>'
        f'<polyline fill="none" stroke="#805ad5" stroke-width="2" points="{points}"/>{marks}</svg>'
    )
