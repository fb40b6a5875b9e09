"""Keep secrets out of history records, status files, job.json and logs."""

from __future__ import annotations

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
