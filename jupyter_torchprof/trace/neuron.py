"""TorchNeuron's profile folder: what is in it, and whether the capture worked.

TorchNeuron writes, per rank, a Kineto ``trace.json`` (host side, with
``privateuse1_runtime`` / ``privateuse1_driver`` calls, and the NeuronCores'
executions as ``nc_exec_running`` events) beside Neuron Explorer's own files:
``ntrace.pb``, ``*.neff`` (compiled programs) and ``*.ntff`` (device traces).
We read ``trace.json``; the others are kept with the run for Neuron Explorer
(their formats are Neuron's own). A failed capture leaves an empty folder
or 0-byte ``.ntff`` files, which `check_folder` reports in one line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from . import categories as K

#: Neuron Explorer's files, kept with a run and listed beside its trace.
NEURON_SUFFIXES = (".ntff", ".neff", "ntrace.pb", "trace_info.pb", "cpu_util.pb", "host_mem.pb")


#: Entries looked at, at most: a trace saved in a home folder must not cost
#: a walk over everything below it.
MAX_ENTRIES = 5000


def neuron_files(folder: Path, max_depth: int = 2) -> list[Path]:
    """Neuron Explorer files in ``folder`` and up to ``max_depth`` levels below, sorted."""
    found: list[Path] = []
    level = [folder]
    seen = 0
    for _ in range(max_depth + 1):
        nxt = []
        for d in level:
            try:
                entries = list(d.iterdir())
            except OSError:
                continue
            seen += len(entries)
            if seen > MAX_ENTRIES:
                return sorted(found)
            for p in entries:
                if p.is_file() and p.name.endswith(NEURON_SUFFIXES):
                    found.append(p)
                elif p.is_dir() and not p.name.startswith("."):
                    nxt.append(p)
        level = nxt
    return sorted(found)


def check_folder(folder: Path, files: list[Path] | None = None) -> str | None:
    """One line when the Neuron device capture in ``folder`` failed, else None.

    The device trace is missing when no ``.ntff`` exists beside the NEFFs or
    ``ntrace.pb`` that show a capture ran, and empty when every ``.ntff`` has
    0 bytes.
    """
    files = neuron_files(folder) if files is None else files
    if not files:
        return None
    ntff = [p for p in files if p.name.endswith(".ntff")]
    if not ntff:
        return (
            f"TorchNeuron: no device trace (*.ntff) in {folder} beside "
            f"{', '.join(sorted({p.name for p in files})[:3])}: the NeuronCore capture did not run "
            "(capture_enabled_for_nc, or a failed capture); device columns come only from "
            "nc_exec_running events"
        )
    empty = [p for p in ntff if _size(p) == 0]
    if len(empty) == len(ntff):
        return (
            f"TorchNeuron: every device trace (*.ntff) in {folder} is empty (0 bytes): "
            "the NeuronCore capture failed; Neuron Explorer cannot open this profile"
        )
    return None


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def mark_device_work(events: pd.DataFrame) -> int:
    """Make events named like device work (`categories.DEVICE_WORK_NAMES`) kernels; returns how many.

    TorchNeuron's ``nc_exec_running`` events are the NeuronCores' executions
    whatever category they are written with; Kineto puts the device in
    ``pid`` and the core's queue in ``tid`` of device events, which become
    ``device`` and ``stream`` here.
    """
    names = events["name"]
    cats = names.cat.categories if isinstance(names.dtype, pd.CategoricalDtype) else pd.unique(names)
    wanted = [c for c in cats if c in K.DEVICE_WORK_NAMES]
    if not wanted:
        return 0
    rows = np.flatnonzero(names.isin(wanted).to_numpy() & ~K.kind_mask(events, K.KERNEL))
    if not len(rows):
        return 0
    kind = events["kind"].to_numpy(copy=True)
    kind[rows] = K.KERNEL
    events["kind"] = pd.Categorical(kind, categories=list(K.KINDS))
    for column, source in (("device", "pid"), ("stream", "tid")):
        values = events[column].to_numpy(copy=True)
        fill = values[rows] < 0
        values[rows[fill]] = events[source].to_numpy()[rows[fill]]
        events[column] = values
    return len(rows)
