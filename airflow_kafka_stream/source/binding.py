"""A query's binding: the options of each start of a DataFrame defined once and started more than once.

Spark pickles a Python data source when its DataFrame is defined and creates the stream reader from that
instance at every query start. A warm standby defines the job's query before it may take the job, starts it
once as a rehearsal (on a scratch checkpoint, with its own stop handshake and a bounded stretch of records)
and again for real once it has the go; the options that differ between those starts (``startingOffsets``,
``drainPath``, ``startOffsetsPath``, ``maxOffsetsPerTrigger``, ``rehearsalEndOffsets``) are read at each
start from a small JSON file on the driver's host, named by the ``bindingPath`` option. The runtime rewrites
the file only between queries (never while one runs: Spark creates readers again during a query).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from airflow_kafka_stream.errors import InvalidInputError

BINDING_OPTION = "bindingPath"


def binding_path(options: Mapping[str, str]) -> str | None:
    """The ``bindingPath`` option (Spark's option names are case-insensitive)."""
    for key, value in options.items():
        if str(key).lower() == BINDING_OPTION.lower():
            return str(value)
    return None


def bound_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options as given at definition, with the binding file's options replacing them."""
    path = binding_path(options)
    base = {str(key): str(value) for key, value in options.items()}
    if path is None:
        return base
    try:
        with open(path, encoding="utf-8") as handle:
            bound = json.load(handle)
    except FileNotFoundError:
        raise InvalidInputError(f"option bindingPath: {path} does not exist; it is written by the job runtime "
                                "before each start of its query, so start the query with runtime.run") from None
    except ValueError as exc:
        raise InvalidInputError(f"option bindingPath: {path} is not JSON ({exc})") from None
    lowered = {str(key).lower() for key in bound}
    kept = {key: value for key, value in base.items() if key.lower() not in lowered}
    return {**kept, **{str(key): str(value) for key, value in bound.items()}, BINDING_OPTION: path}


def write_binding(path: str, options: Mapping[str, str]) -> None:
    """Write the options of the next start (atomically: a reader sees the old file or the new one)."""
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump({key: str(value) for key, value in options.items() if key != BINDING_OPTION}, handle)
    os.replace(temporary, path)
