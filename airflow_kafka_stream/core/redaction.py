"""Keep secrets out of history records, status files, job.json and logs."""

from __future__ import annotations

import re
from typing import Any

SECRET_MARKERS = ("password", "secret", "token", "credential", "sasl.jaas", "key.pem", "keystore", "oauthbearer")


def is_secret_key(key: str) -> bool:
    """Whether a setting's name says its value is a secret (passwords, keys, tokens)."""
    return any(marker in str(key).lower() for marker in SECRET_MARKERS)


def redact(args: dict[str, Any]) -> dict[str, Any]:
    """A copy safe for history and logs: values of secret-looking keys masked, nested dicts too."""
    clean: dict[str, Any] = {}
    for key, value in args.items():
        if is_secret_key(key):
            clean[key] = "***"
        elif isinstance(value, dict):
            clean[key] = redact(value)
        else:
            clean[key] = value
    return clean


def secret_values(settings: dict[str, Any]) -> list[str]:
    """The values of secret-looking settings, longest first (so a value containing another is masked whole)."""
    values = {str(value) for key, value in settings.items() if is_secret_key(key) and str(value)}
    return sorted(values, key=len, reverse=True)


def without_userinfo(text: str) -> str:
    """``text`` with the user and password of every URL in it masked (``http://***@host``): an exporter's or a
    transport's error quotes its endpoint, which may carry credentials."""
    return re.sub(r"//[^/@\s]+@", "//***@", text)


def redact_text(text: str, secrets: list[str]) -> str:
    """``text`` with every occurrence of a secret value masked: error texts can quote the config
    (a user's code, a client's message) and go to status files, logs and Airflow's UI."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
