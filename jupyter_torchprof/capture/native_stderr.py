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

#: Native warnings that say something about the numbers: each becomes one
#: note on the profile (where the user reads about the numbers) instead of a
#: red stderr box in the cell.
KNOWN = (
    (
        re.compile(
            r"CPUAllocator\.cpp.*Memory block of unknown size was allocated before the profiling started"
        ),
        "memory freed during the steps but allocated before profiling started is not in the memory "
        "figures (torch cannot size those blocks): allocated and freed bytes are relative to the start",
    ),
)


@contextmanager
def filtered_native_stderr(notes: list[str] | None = None) -> Iterator[None]:
    """Drop Kineto's marker lines written to fd 2 inside the block.

    With ``notes``, the `KNOWN` warnings are taken out too and their note is
    appended there once.
    """
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
            kept = []
            for line in sink.read().decode("utf-8", "replace").splitlines():
                if not line.strip() or NOISE.match(line):
                    continue
                known = (
                    next((note for rx, note in KNOWN if rx.search(line)), None) if notes is not None else None
                )
                if known is None:
                    kept.append(line)
                elif known not in notes:
                    notes.append(known)
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")
