"""Secrets stay out of what the project writes: records are masked by key, error texts by value."""

from __future__ import annotations

from airflow_kafka_stream.core.redaction import redact, redact_text, secret_values


def test_records_mask_secret_looking_keys_at_any_depth():
    given = {"sasl.password": "p", "sasl.username": "u", "nested": {"ssl.key.password": "k", "port": 1}}
    assert redact(given) == {"sasl.password": "***", "sasl.username": "u", "nested": {"ssl.key.password": "***", "port": 1}}


def test_error_texts_mask_every_secret_value():
    settings = {"sasl.password": "hunter2", "sasl.oauthbearer.client.secret": "hunter2-long", "sasl.username": "alice",
                "ssl.key.password": ""}
    assert secret_values(settings) == ["hunter2-long", "hunter2"]  # longest first; empty values are not secrets
    text = "login failed for alice with hunter2 (secret hunter2-long)"
    assert redact_text(text, secret_values(settings)) == "login failed for alice with *** (secret ***)"
