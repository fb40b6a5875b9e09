"""Refusals in an operator's words: the settings an operation names, as the operator's parameters.

An operation's refusal names the settings that get the user out of it
(``StreamError.settings``, e.g. ``drop_state`` or ``scope``). The CLI adds its
flags (``cli.flags.refusal_text``); an operator adds, here, the parameter of
its own that gives each setting, so a task's failure says what to change in
the DAG. Settings the operator has no parameter for are left as the message
words them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from airflow_kafka_stream.errors import OperationIncompleteError, StreamError

#: An operation's setting -> the operator parameter that gives it, where the two names differ.
PARAMETER_OF_SETTING = {
    "scope": "topics",
    "bootstrap_servers": "kafka_conn_id",
    "storage_options": "storage_conn_id",
    "master": "spark_conn_id",
    "timeout": "timeout_seconds",
    "kill_timeout": "kill_timeout_seconds",
    "standby_ready_timeout_seconds": "ready_timeout_seconds",
}

#: Operator methods an operation's refusal can come out of: the start and every resumption after a deferral.
_ENTRY_POINTS = ("execute", "execute_complete")

T = TypeVar("T", bound=type)


def parameters_of(operator_class: type) -> set[str]:
    """Every keyword the operator's constructor takes, its base classes' included (up to BaseOperator)."""
    names: set[str] = set()
    for klass in operator_class.__mro__:
        if klass.__module__.startswith("airflow.") or klass is object:
            break
        init = klass.__dict__.get("__init__")
        if init is not None:
            names.update(name for name, p in inspect.signature(init).parameters.items()
                         if name != "self" and p.kind is not p.VAR_KEYWORD)
    return names


def parameter_for(operator_class: type, setting: str) -> str | None:
    """The operator's parameter that gives ``setting``, or None when it has none."""
    name = PARAMETER_OF_SETTING.get(setting, setting)
    return name if name in parameters_of(operator_class) else None


def parameter_text(operator_class: type, settings: Iterable[str]) -> str | None:
    """``StreamResetOperator parameters: topics (scope), drop_state``, or None when none applies."""
    named = [(setting, parameter_for(operator_class, setting)) for setting in settings]
    listed = [name if name == setting else f"{name} ({setting})" for setting, name in named if name]
    if not listed:
        return None
    noun = "parameter" if len(listed) == 1 else "parameters"
    return f"{operator_class.__name__} {noun}: {', '.join(listed)}"


def in_parameters(error: StreamError, operator_class: type) -> StreamError:
    """The same refusal, its message ending with the operator's parameters for its settings."""
    if getattr(error, "names_parameters", False) or isinstance(error, OperationIncompleteError):
        return error
    text = parameter_text(operator_class, error.settings)
    if text is None:
        return error
    translated = type(error)(f"{error} [{text}]", setting=error.settings)
    translated.names_parameters = True  # type: ignore[attr-defined]
    translated.__cause__ = error
    return translated


def refusals_name_parameters(operator_class: T) -> T:
    """Class decorator: refusals out of ``execute`` and the ``*_complete`` resumptions name the parameters.

    Only the methods the class itself defines are wrapped; a subclass that defines its own takes the
    decorator too (a refusal is translated once, however many wrapped methods it passes through).
    """
    for name, method in list(vars(operator_class).items()):
        if callable(method) and (name in _ENTRY_POINTS or name.endswith("_complete")):
            setattr(operator_class, name, _translating(method))
    return operator_class


def _translating(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except StreamError as exc:
            translated = in_parameters(exc, type(self))
            if translated is exc:
                raise
            raise translated from exc

    return wrapper
