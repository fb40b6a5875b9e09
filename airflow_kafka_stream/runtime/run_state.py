"""The one run's state that more than one of the runtime's components reads or writes.

:class:`~airflow_kafka_stream.runtime.StreamRuntime` makes one :class:`RunState` and hands it to its
components (``takeover``, ``source_setup``, ``supervision``, ``heartbeat``, ``metrics``); what only one
component needs stays in that component. Fields read together with others (the figures of the status
document) are read and written under :attr:`RunState.lock`; the events wake and end the heartbeat.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_kafka_stream.core.job_state import JobState
from airflow_kafka_stream.core.offsets import PartitionOffsets
from airflow_kafka_stream.runtime.config import utc_now

#: Lag samples kept in the status file (one per batch of this run; a few KB).
LAG_SAMPLES = 120
#: How long a part of the run may take to close when the run ends (the output asset's last windows, the sink).
PART_CLOSE_SECONDS = 15.0


@dataclass(eq=False)
class RunState:
    """What the runtime's components share about this run (one instance per :class:`StreamRuntime`)."""

    #: Guards the figures below that the status document reads together (state, counters, last batch, ...).
    lock: threading.Lock = field(default_factory=threading.Lock)
    state: str = JobState.STARTING
    started_at: datetime = field(default_factory=utc_now)
    stopped_at: datetime | None = None
    error: str | None = None
    note: str | None = None
    #: The running query, and its (id, runId) read once when it started.
    query: Any = None
    query_ids: tuple[str | None, str | None] = (None, None)
    batches: int = 0
    records: int = 0
    last_batch_id: int | None = None
    last_offsets: PartitionOffsets | None = None
    dead_letters: int = 0
    #: Where this run reads its batches and why (the source's readMode), said once.
    read_placement: dict[str, Any] | None = None
    #: [epoch, batch id, records waiting when it was planned] of the newest batches: the job page's lag plot.
    lag_samples: deque[list] = field(default_factory=lambda: deque(maxlen=LAG_SAMPLES))
    stop_requested_at: str | None = None
    stop_requested_by: str | None = None
    drain_overdue: bool = False
    #: Set when the driver fenced itself (its heartbeat could not be written): why, as the run's error.
    fence_reason: str | None = None
    #: Set when the driver found another driver holding the job (``Heartbeat.still_owner``): it writes nothing
    #: of the job from then on, not even its final status.
    superseded: bool = False
    #: Set when the query was stopped at once (a kill request, a drain given up), not drained: an aborted run.
    stopped_at_once: bool = False
    #: Set once the job was taken (a start refused or failed is done again in full when retried).
    prepared: bool = False
    #: True while a standby rehearses the job's query (``generation`` then reads 0).
    rehearsing: bool = False
    generation: int | None = None
    #: Status fields of the run's optional parts (the output asset's announcer, the transactional Kafka sink):
    #: field name -> its document now.
    status_parts: dict[str, Callable[[], Any]] = field(default_factory=dict)
    #: What the run closes when it ends, after its final status, each given a bound in seconds.
    closers: list[Callable[[float], Any]] = field(default_factory=list)

    def add_part(self, name: str, document: Callable[[], Any], close: Callable[[float], Any]) -> None:
        """An optional part of the run: its status field ``name`` and how it closes when the run ends."""
        self.status_parts[name] = document
        self.closers.append(close)
    checkpoint_location: str | None = None
    starting_offsets: str = ""
    #: A standby's binding file: the options of the query it built before its go (``source/binding.py``).
    binding_file: str | None = None
    #: The job's DataFrame was defined by a standby before its go (then rehearsed, and bound to the run after it).
    defined_in_standby: bool = False
    #: Wakes the heartbeat for an early status write (a batch, a state change).
    wake_status: threading.Event = field(default_factory=threading.Event)
    #: Set at the end of the run: the heartbeat thread stops.
    closing: threading.Event = field(default_factory=threading.Event)
