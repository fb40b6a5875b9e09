"""Keep PySpark's per-task garbage collection off a reused Python worker's critical path.

A reused Python worker runs a full ``gc.collect()`` after every task (``pyspark/daemon.py``), and the
next task's input waits until it returns. A full collection walks every object the worker tracks,
and the imports a read needs (pyspark, pyarrow, confluent-kafka, this package) leave 50,000 to
85,000 of them: 10 to 60 ms on the 2-core test machine, for every task, before it reads a record.

:func:`settle` runs once per worker process, on its first read: it collects what is garbage already,
then freezes every live object (``gc.freeze``) into the collector's permanent generation. Later
collections walk only what was made since. Frozen objects are still freed by reference counting;
only a reference cycle among them that becomes garbage later is never collected (at most the first
task's leftovers, once per worker).
"""

from __future__ import annotations

import gc

_settled = False


def settle() -> None:
    """Collect, then freeze what lives, the first time a read runs in this process."""
    global _settled
    if _settled:
        return
    _settled = True
    gc.collect()
    gc.freeze()
