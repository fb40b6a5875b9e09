"""Text for people: the tables and summaries the CLI prints and the operators write to their task logs.

Core and the operations return values (``ops/results.py``, ``core``'s plans and
reports); this package turns them into text, once, so a terminal and an Airflow
task log show the same words. Nothing here names a command-line flag: what is
the CLI's own (the trailer of a dry run, the flag of a setting) stays in ``cli/``.

- ``table``: the one fixed-width table writer.
- ``reset``: reset plans and executed resets.
- ``checkpoint``: a checkpoint's position, fsck reports, repairs, verify results.
- ``job``: a job's status, a stop's result, the operation history, a released lock.
- ``savepoints``: savepoint lists and manifests, restores, prunes.
"""
