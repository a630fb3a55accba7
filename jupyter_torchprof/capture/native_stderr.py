"""Keep Kineto's internal log lines out of the notebook.

Kineto writes lines such as ``USDT: ... profiler_start`` straight to file
descriptor 2 on every start and stop; ipykernel forwards that descriptor to
the cell output, where they look like errors. While the profiler changes state
we point descriptor 2 at a temporary file, then pass on every line that is not
one of those markers, so real native warnings still reach the user.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

#: Lines Kineto prints for tracing tools, not for people.
NOISE = re.compile(r"^(USDT|STAGE):\S* .*(SyncActivityProfilerHandler|ActivityProfiler)", re.ASCII)


@contextmanager
def filtered_native_stderr() -> Iterator[None]:
    """Drop Kineto's marker lines written to fd 2 inside the block."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept = [
                line
                for line in sink.read().decode("utf-8", "replace").splitlines()
                if line.strip() and not NOISE.match(line)
            ]
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")
