"""What a driver launched from an Airflow task needs to emit its lineage under that task (docs/lineage.md).

Airflow's ``[openlineage]`` settings become the OpenLineage client's own variables in the driver's environment
(never its arguments): the transport (``OPENLINEAGE__TRANSPORT``, a JSON object that may hold an API key: the
environment, or the private properties file of a cluster submit, as the Kafka secrets) unless the job's
environment configures the client itself (then those ``OPENLINEAGE*`` variables are given on), the config file (``OPENLINEAGE_CONFIG``), the namespace, and the
launching task's run as the driver's parent (``OPENLINEAGE_PARENT_ID``, ``OPENLINEAGE_ROOT_PARENT_ID``: the
OpenLineage provider's ``lineage_parent_id`` and ``lineage_root_parent_id``, so the link names the very run id
Airflow's own events carry). With OpenLineage disabled or unconfigured in Airflow, nothing is added.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from airflow_kafka_stream.core.lineage import NAMESPACE_ENV, PARENT_ENV, ROOT_PARENT_ENV, client_configured

# Lazy imports: the OpenLineage provider's configuration and macros (and through them the client) are loaded when
# a driver is launched, not when a DAG file that uses the operators is parsed.

log = logging.getLogger(__name__)

TRANSPORT_ENV = "OPENLINEAGE__TRANSPORT"
CONFIG_ENV = "OPENLINEAGE_CONFIG"
#: What this module decides itself: never copied from the launching environment.
PASSED_ON = (NAMESPACE_ENV, PARENT_ENV, ROOT_PARENT_ENV)


def lineage_env(enabled: bool, transport: Mapping[str, Any] | None, config_path: str | None, namespace: str,
                parent_id: str | None, root_parent_id: str | None, job_env: Mapping[str, str]) -> dict[str, str]:
    """The driver's OpenLineage variables from Airflow's settings; ``job_env`` is what the driver gets anyway
    (a client configured there keeps its own transport)."""
    if not enabled:
        return {}
    env = {NAMESPACE_ENV: namespace}
    if client_configured(job_env):  # its own settings, given on too: a driver in a cluster inherits no environment
        env.update({k: v for k, v in job_env.items() if k.startswith("OPENLINEAGE") and k not in PASSED_ON})
    else:
        if transport:
            env[TRANSPORT_ENV] = json.dumps(dict(transport))
        elif config_path:
            env[CONFIG_ENV] = config_path
    if parent_id:
        env[PARENT_ENV] = parent_id
    if root_parent_id:
        env[ROOT_PARENT_ENV] = root_parent_id
    return env


def driver_lineage_env(job_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """:func:`lineage_env` from Airflow's ``[openlineage]`` and the task running now; empty (with a warning) when
    either cannot be read: a driver without lineage, never a launch that fails for it."""
    try:
        from airflow.providers.openlineage import conf as ol_conf

        if ol_conf.is_disabled():
            return {}
        parent, root = _task_parent()
        return lineage_env(True, ol_conf.transport(), ol_conf.config_path(), ol_conf.namespace(), parent, root,
                           os.environ if job_env is None else job_env)
    except Exception as exc:  # noqa: BLE001 - lineage must not stop a launch
        log.warning("the driver gets no OpenLineage settings from Airflow: %s: %s", type(exc).__name__, exc)
        return {}


def _task_parent() -> tuple[str | None, str | None]:
    """``namespace/job/runId`` of the task running now and of its DAG run, as the provider's macros build them."""
    from airflow.providers.openlineage.plugins.macros import lineage_parent_id, lineage_root_parent_id
    from airflow.sdk import get_current_context

    try:
        ti = get_current_context()["ti"]
    except Exception:  # noqa: BLE001 - not inside a task (a test, a tool): no parent to name
        return None, None
    return lineage_parent_id(ti), lineage_root_parent_id(ti)
