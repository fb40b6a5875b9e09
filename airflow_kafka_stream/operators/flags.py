"""Switches given to operators as bools or as rendered templates ("{{ params.x }}" renders to text)."""

from __future__ import annotations

from airflow_kafka_stream.errors import InvalidInputError


def as_flag(value: bool | str, name: str) -> bool:
    """A switch given as a bool or as a rendered template ("True", "false", ...)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", "none", ""):
        return False
    raise InvalidInputError(f"{name} must be true or false, got {value!r}")
