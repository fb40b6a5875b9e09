"""The job page's seconds plot: the job's time lag (the oldest unprocessed record's age) over time, inline SVG.

It sits beside the records plot (``job_page_html.lag_plot``): records waiting mean little without the
topic's rate, seconds do. The samples are the driver's ``time_lag_samples`` ([epoch, max seconds], one
per measurement, at most one a heartbeat interval). ``limit`` (seconds), when given, is drawn as a dashed
line and the samples above it are marked: where a lag objective shows its breaches.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, tzinfo

from airflow_kafka_stream.plugins.svg_plot import LEFT, RIGHT, PlotFrame


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
    peak = max(max(values), limit or 0.0, 1.0)
    frame = PlotFrame(times, values, peak, width, height, tz)
    marks = ""
    if limit is not None:
        y = frame.y(limit)
        marks = (f'<line class="limit" x1="{LEFT}" y1="{y:.1f}" x2="{width - RIGHT}" y2="{y:.1f}" '
                 'stroke="#c53030" stroke-dasharray="4 3"/>'
                 + "".join(f'<circle class="breach" cx="{frame.x(t):.1f}" cy="{frame.y(v):.1f}" r="3" '
                           'fill="#c53030"/>' for t, v in zip(times, values, strict=True) if v > limit))
    return (
        f'<p class="time-lag-now">Time lag at the last measurement: <b>{seconds_text(values[-1])}</b> (peak '
        f"{seconds_text(max(values))}, {len(samples)} measurements)</p>"
        + frame.svg("time-lag-plot", "oldest unprocessed record age in seconds", f"{peak:.0f} s", "0 s", "#805ad5",
                    marks)
    )
