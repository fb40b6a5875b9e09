"""The job page's line plots over time (records waiting, time lag) drawn by one piece of inline SVG.

Each plot is a series of (epoch seconds, value) with a peak it is scaled to; the frame holds the scaling
and the time labels, and draws the axes, the labels and the line. A plot adds its own marks inside.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

LEFT, RIGHT, TOP, BOTTOM = 56, 8, 8, 22


@dataclass(frozen=True)
class PlotFrame:
    """``values`` over ``times`` scaled to ``peak`` in a ``width`` × ``height`` SVG, times labelled in ``tz``."""

    times: Sequence[float]
    values: Sequence[float]
    peak: float
    width: int
    height: int
    tz: tzinfo

    def x(self, t: float) -> float:
        span = max(self.times[-1] - self.times[0], 1.0)
        return LEFT + (t - self.times[0]) / span * (self.width - LEFT - RIGHT)

    def y(self, v: float) -> float:
        return TOP + (1 - v / self.peak) * (self.height - TOP - BOTTOM)

    @property
    def start(self) -> str:
        return datetime.fromtimestamp(self.times[0], self.tz).strftime("%H:%M:%S")

    @property
    def end_and_zone(self) -> tuple[str, str]:
        last = datetime.fromtimestamp(self.times[-1], self.tz)
        return last.strftime("%H:%M:%S"), last.tzname() or ""

    def svg(self, css: str, describes: str, peak_label: str, zero_label: str, colour: str, marks: str = "") -> str:
        """The plot: axes, the peak and zero labels, the time range, the line in ``colour``, then ``marks``."""
        end, zone = self.end_and_zone
        points = " ".join(f"{self.x(t):.1f},{self.y(v):.1f}" for t, v in zip(self.times, self.values, strict=True))
        width, height = self.width, self.height
        return (
            f'<svg class="{css}" width="{width}" height="{height}" role="img" '
            f'aria-label="{describes} from {self.start} to {end} {zone}">'
            f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{height - BOTTOM}" stroke="#a0aec0"/>'
            f'<line x1="{LEFT}" y1="{height - BOTTOM}" x2="{width - RIGHT}" y2="{height - BOTTOM}" stroke="#a0aec0"/>'
            f'<text x="{LEFT - 4}" y="{TOP + 10}" text-anchor="end">{peak_label}</text>'
            f'<text x="{LEFT - 4}" y="{height - BOTTOM}" text-anchor="end">{zero_label}</text>'
            f'<text x="{LEFT}" y="{height - 6}">{self.start}</text>'
            f'<text x="{width - RIGHT}" y="{height - 6}" text-anchor="end">{end} {zone}</text>'
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>{marks}</svg>'
        )
