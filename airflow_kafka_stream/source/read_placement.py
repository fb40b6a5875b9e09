"""Where a batch is read: by the driver while it plans the batch, or by Spark tasks on the executors.

A Python task costs Spark tens of milliseconds before it reads a record (a Python worker, the
pickled reader, an Arrow stream back to the JVM): for a batch of a few hundred records that is
most of the batch. Read on the driver, the records travel to the JVM with the batch's plan and
no Python task runs, but one process reads them all and holds them until Spark has them. So
small batches are read on the driver and large ones by tasks. With ``readMode=auto`` (the
default) the choice is made batch by batch from the batch's planned size, which is known before
a record is read: a job that keeps up reads on the driver, the same job catching up after a
restart reads its large batches in parallel on the executors. An explicit ``readMode`` always
wins. Pure logic: the reader in driver_reader.py applies it.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_kafka_stream.source.source_options import READ_AUTO, READ_ON_DRIVER, READ_ON_EXECUTORS, SourceOptions

MIB = 1024 * 1024


@dataclass(frozen=True)
class ReadPlacement:
    """The query's rule for placing batches, and why it is that rule (logged once, shown in the status)."""

    #: ``auto``, ``driver`` or ``executors``: the rule in force (``auto`` can fall back to executors).
    mode: str
    #: With ``auto``: the largest batch, in records, read on the driver.
    max_records: int
    #: With ``auto``: the most a driver-read batch may hold; past it the batch is read by tasks.
    max_bytes: int
    reason: str

    def on_driver(self, records: int) -> bool:
        """Whether a batch of ``records`` planned records is read on the driver."""
        if self.mode == READ_ON_DRIVER:
            return True
        return self.mode == READ_AUTO and 0 < records <= self.max_records

    @property
    def byte_budget(self) -> int | None:
        """Bytes after which a driver read gives the batch to tasks; None: read it whole (readMode=driver)."""
        return self.max_bytes if self.mode == READ_AUTO else None

    def to_dict(self) -> dict[str, object]:
        body: dict[str, object] = {"mode": self.mode, "reason": self.reason}
        if self.mode == READ_AUTO:
            body.update(driver_max_records=self.max_records, driver_max_bytes=self.max_bytes)
        return body


def read_placement(options: SourceOptions, driver_reader_missing: str | None = None) -> ReadPlacement:
    """The placement rule for ``options``.

    ``driver_reader_missing`` is why the driver cannot use the C reader (None when it can): an
    automatic choice never makes a query that reads on the executors fail on the driver, so auto
    then reads every batch with tasks (an explicit readMode=driver fails as it always did).
    """
    limits = (options.driver_read_max_records, options.driver_read_max_bytes)
    if options.read_mode == READ_ON_DRIVER:
        return ReadPlacement(READ_ON_DRIVER, *limits, "readMode=driver: every batch is read on the driver")
    if options.read_mode == READ_ON_EXECUTORS:
        return ReadPlacement(READ_ON_EXECUTORS, *limits, "readMode=executors: every batch is read by Spark tasks")
    spread = [name for name, value in (("minPartitions", options.min_partitions),
                                       ("maxRecordsPerPartition", options.max_records_per_partition)) if value]
    if spread:
        return ReadPlacement(READ_ON_EXECUTORS, *limits,
                             f"readMode=auto: {' and '.join(spread)} spread every batch over Spark tasks, "
                             "so every batch is read by them")
    if driver_reader_missing and not options.allow_python_fallback:
        return ReadPlacement(READ_ON_EXECUTORS, *limits,
                             f"readMode=auto: the driver cannot use the C reader ({driver_reader_missing}), "
                             "so every batch is read by Spark tasks")
    return ReadPlacement(READ_AUTO, *limits,
                         f"readMode=auto: batches of up to {limits[0]} records (and {_size(limits[1])}) are read "
                         "on the driver while Spark plans them, larger ones by Spark tasks")


def _size(count: int) -> str:
    return f"{count // MIB} MiB" if count % MIB == 0 else f"{count} bytes"
