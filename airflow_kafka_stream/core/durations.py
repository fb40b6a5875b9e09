"""ISO 8601 durations, the one parser for every duration a user gives.

A reset's by-duration value, verify's stall threshold, the savepoint prune's
max_age and the watchdog's thresholds are all written as ``PnDTnHnMn.nS``
(java.time.Duration's form, which Kafka's by-duration strategy takes) and read
here. Years, months and weeks are refused: they are not fixed lengths.
"""

from __future__ import annotations

import re
from datetime import timedelta

from airflow_kafka_stream.errors import OffsetPlanError

# java.time.Duration's grammar, as kafka-consumer-groups.sh's by-duration accepts it: PnDTnHnMn.nS.
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d{1,9}))?S)?)?$")


def parse_duration(text: str, setting: str = "value") -> timedelta:
    """Parse ``PnDTnHnMn.nS`` (java.time.Duration's form, which Kafka's by-duration strategy takes).

    ``setting`` is the argument the text came from, named by the refusal (a by-duration strategy's value
    unless the caller says otherwise: max_age, stall_threshold).
    """
    stripped = (text or "").strip().upper()
    match = _DURATION.match(stripped)
    if not match or stripped in ("P", "PT") or stripped.endswith("T"):
        hint = ""
        if re.match(r"^P.*\d+[YWM]", stripped.split("T")[0] if stripped.startswith("P") else ""):
            hint = "; years, months and weeks are not fixed lengths: count in days (P7D, P30D)"
        elif stripped.startswith("-"):
            hint = "; a negative duration points into the future: use to-latest instead"
        raise OffsetPlanError(
            f"duration {text!r} is not an ISO 8601 duration of the form PnDTnHnMnS, like PT1H, PT30M or P1DT2H{hint}",
            setting=setting
        )
    days, hours, minutes, seconds, fraction = match.groups()
    micros = int((fraction or "0").ljust(9, "0")[:6])
    return timedelta(days=int(days or 0), hours=int(hours or 0), minutes=int(minutes or 0),
                     seconds=int(seconds or 0), microseconds=micros)
