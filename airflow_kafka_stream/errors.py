"""One exception hierarchy for the whole project.

Every error says what is wrong (topic, partition, offset or path involved) and
how to get out of it. The CLI maps :class:`InvalidInputError` to exit code 2 and
the other refusals (job running, lock held, broker unreachable, damaged
checkpoint) to exit code 2 as well, since nothing was changed; only
:class:`OperationIncompleteError` (something changed, then the operation could
not finish) exits 1. The Airflow layer turns them into task failures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


class StreamError(Exception):
    """Base class of every error raised by airflow_kafka_stream.

    ``setting``, when given, names the operation's argument that gets the user out of it
    (``job_home``, ``timeout``, ``allow_sink_batch_log``...), or several of them when the
    refusal has several reasons, so each front end can point at its own spelling of them
    (the CLI adds its flags, the operators their parameters). The message names them by
    these setting names or in words, never in one front end's spelling.

    ``log`` and ``log_tail``, when given, are the driver log that says more (a failed standby's, a driver that
    did not start) and its end: ``str()`` ends with that tail (what a task log shows); ``reason`` is the message
    without it (the CLI prints the reason and the log's path, and the tail only with ``--verbose``).
    """

    def __init__(self, *args: object, setting: str | Sequence[str] | None = None, log: str | None = None,
                 log_tail: str = "") -> None:
        super().__init__(*args)
        names = (setting,) if isinstance(setting, str) else tuple(setting or ())
        #: Every setting that gets the user out, in the order the message names them.
        self.settings: tuple[str, ...] = tuple(dict.fromkeys(names))
        self.log, self.log_tail = log, log_tail

    @property
    def reason(self) -> str:
        """The message without the log's end."""
        return super().__str__()

    def __str__(self) -> str:
        return self.reason + (f"\n--- end of {self.log} ---\n{self.log_tail}" if self.log_tail else "")

    @property
    def setting(self) -> str | None:
        """The first setting the refusal names (``settings`` holds all of them)."""
        return self.settings[0] if self.settings else None


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


class WatchdogGaveUp(JobStateError):
    """The watchdog stopped restarting a job that keeps failing: a person must look at it (its failure)."""


class OperationIncompleteError(StreamError):
    """An operation changed something and could not finish; the message says what holds now and how to finish."""


class SavepointError(StreamError):
    """A savepoint is missing, incomplete or fails its checksums."""


class ReaderUnavailableError(StreamError):
    """An executor cannot use the C Kafka reader and the Python fallback was not allowed."""


class Refusals:
    """Every reason an operation is refused, raised as one error so a user fixes them all at once.

    A check that raises a :class:`StreamError` is run with :meth:`check` (or its error passed
    to :meth:`add`); :meth:`raise_any` then raises nothing, the one reason, or one error whose
    message numbers every reason and whose settings are all of theirs.
    """

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.reasons: list[StreamError] = []

    def add(self, reason: StreamError) -> None:
        self.reasons.append(reason)

    def check(self, refuse: Callable[..., object], *args: object, **kwargs: object) -> None:
        """Run a check, keeping its refusal instead of raising it."""
        try:
            refuse(*args, **kwargs)
        except OperationIncompleteError:
            raise  # something changed: not a reason to collect
        except StreamError as exc:
            self.reasons.append(exc)

    def raise_any(self) -> None:
        if len(self.reasons) == 1:
            raise self.reasons[0]
        if self.reasons:
            raise combined(self.operation, self.reasons)


def combined(operation: str, reasons: Sequence[StreamError]) -> StreamError:
    """One error for several reasons: each numbered with its way out, every setting kept, the first chained.

    Its class is the most specific one every reason shares, so a front end treats it as it would each one.
    """
    kind = next(cls for cls in type(reasons[0]).__mro__
                if issubclass(cls, StreamError) and all(isinstance(r, cls) for r in reasons))
    listed = " ".join(f"({n}) {_sentence(str(reason))}" for n, reason in enumerate(reasons, 1))
    settings = [name for reason in reasons for name in reason.settings]
    error = kind(f"{operation} is refused for {len(reasons)} reasons; nothing was changed. {listed}",
                 setting=settings)
    error.__cause__ = reasons[0]
    return error


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else f"{text}."
