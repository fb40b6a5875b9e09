"""Run the CLI and SIGKILL this process just before its Nth durable step (for crash tests only).

A step is an atomic file write, a streamed file copy or a file deletion. With CRASH_AT_STEP=0 nothing is
killed and the number of steps is printed on stderr as ``STEPS=<n>``.
"""

from __future__ import annotations

import os
import signal
import sys

from fsspec.implementations.local import LocalFileSystem

from airflow_kafka_stream.checkpoint import file_copy
from airflow_kafka_stream.storage import files

CRASH_AT = int(os.environ.get("CRASH_AT_STEP", "0"))
steps = 0


def _step() -> None:
    global steps
    steps += 1
    if steps == CRASH_AT:
        os.kill(os.getpid(), signal.SIGKILL)


_real_write = files.write_atomic
_real_rm_file = LocalFileSystem.rm_file


def _write(fs, path, data):
    _step()
    return _real_write(fs, path, data)


def _rm_file(self, path, **kwargs):
    _step()
    return _real_rm_file(self, path, **kwargs)


_real_copy_file = file_copy.copy_file


def _copy_file(*args, **kwargs):
    _step()
    return _real_copy_file(*args, **kwargs)


# Patched before the CLI imports the modules that bind these by name (a streamed savepoint copy is a step too).
files.write_atomic = _write
LocalFileSystem.rm_file = _rm_file
file_copy.copy_file = _copy_file

if __name__ == "__main__":
    from airflow_kafka_stream import cli

    code = cli.main(sys.argv[1:])
    print(f"STEPS={steps}", file=sys.stderr)
    sys.exit(code)
