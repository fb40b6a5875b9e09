"""Checkpoint and savepoint storage: reading, checking, appending, saving and restoring (fsspec I/O)."""
