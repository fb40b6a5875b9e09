"""One exception hierarchy for the whole project.

Every error says what is wrong (topic, partition, offset or path involved) and
how to get out of it. The CLI maps :class:`InvalidInputError` to exit code 2 and
the other refusals (job running, lock held, broker unreachable, damaged
checkpoint) to exit code 2 as well, since nothing was changed; only
:class:`OperationIncompleteError` (something changed, then the operation could
not finish) exits 1. The Airflow layer turns them into task failures.
"""

from __future__ import annotations


class StreamError(Exception):
    """Base class of every error raised by airflow_kafka_stream.

    ``setting``, when given, names the operation's argument that gets the user out of it
    (``job_home``, ``timeout``, ``allow_sink_batch_log``...), so each front end can point at
    its own spelling of it (the CLI adds its flag).
    """

    def __init__(self, *args: object, setting: str | None = None) -> None:
        super().__init__(*args)
        self.setting = setting


class InvalidInputError(StreamError, ValueError):
    """The user's input (options, CLI arguments, params) is invalid. Nothing was changed."""


class CheckpointFormatError(StreamError):
    """A checkpoint or savepoint file does not have the expected format."""


class OffsetPlanError(InvalidInputError):
    """An offset reset plan cannot be made from the given strategy and scope."""


class KafkaAccessError(StreamError):
    """The Kafka cluster could not be reached or refused a request."""


class DataLossError(StreamError):
    """Offsets the query needs are no longer in Kafka (retention, recreated topic)."""


class JobStateError(StreamError):
    """The job is in a state that forbids the operation (running, locked, in flight)."""


class OperationIncompleteError(StreamError):
    """An operation changed something and could not finish; the message says what holds now and how to finish."""


class SavepointError(StreamError):
    """A savepoint is missing, incomplete or fails its checksums."""


class ReaderUnavailableError(StreamError):
    """An executor cannot use the C Kafka reader and the Python fallback was not allowed."""
