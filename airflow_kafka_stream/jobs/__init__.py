"""Example jobs that run under the project's stream runtime (python -m or spark-submit)."""
