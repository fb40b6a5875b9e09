"""Kafka client properties files: the ``--command-config`` of Kafka's own tools, read the same way by the
command line and by a job's driver (where its secrets live, never in arguments)."""

from __future__ import annotations

import re
from pathlib import Path

from airflow_kafka_stream.errors import InvalidInputError

#: ``key=value``, ``key: value`` or ``key value``: the separators of Java's properties format.
_PROPERTY = re.compile(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$")


def read_properties(path: str) -> dict[str, str]:
    """Parse a Java-style client properties file (key=value, # comments, a trailing \\ continues a line).

    A malformed line is refused by number only: its text may hold a secret.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError(f"cannot read client config file {path}: {exc.strerror}; pass an existing file",
                                setting="command_config") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"client config file {path} is not UTF-8 text; pass a properties file",
                                setting="command_config") from exc
    props: dict[str, str] = {}
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending:
            if not line or line.startswith(("#", "!")):
                continue
            start = number
        # An odd number of trailing backslashes continues the logical line (a JAAS line often spans several).
        if (len(line) - len(line.rstrip("\\"))) % 2:
            pending += line[:-1]
            continue
        match = _PROPERTY.match((pending + line).strip())
        pending = ""
        if match is None:
            raise InvalidInputError(
                f"{path} line {start}: expected key=value (the line is not shown: it may hold a secret); "
                "write one setting per line, e.g. security.protocol=SASL_SSL", setting="command_config"
            )
        props[match.group(1)] = match.group(2).strip()
    if pending:
        raise InvalidInputError(f"{path} line {start}: the setting ends with a backslash that continues it onto "
                                "no further line; remove the trailing backslash", setting="command_config")
    return props
