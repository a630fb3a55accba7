"""Every number the findings rules compare against, in one place.

A rule never hard-codes a threshold: it reads it from a `Thresholds`
instance, so a user (or a test) can tighten or relax a rule without touching
its code, and a reader can check every value and the reason for it here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """Thresholds of the findings rules (times in µs, shares in percent).

    Pass a modified copy (``dataclasses.replace(THRESHOLDS, ...)``) to
    `analysis.findings.find` to change a rule's sensitivity.
    """

    # -- severity scale (every rule) ---------------------------------------------
    #: A finding is ``high`` only when the time at stake (``impact_us``) is at
    #: least this share of the step: a fifth of the step is the main lever.
    severity_high_step_pct: float = 20.0
    #: ... and ``medium`` only from this share on; below, fixing it cannot
    #: make the step visibly faster (15 µs of a 50 ms step is 0.03%), so it is
    #: ``info`` whatever the rule would say. A rule may be stricter than the
    #: scale, never looser (see `analysis.findings.scale_severity`).
    severity_medium_step_pct: float = 3.0

    # -- 1. overhead-bound step ------------------------------------------------
    #: The device working less than half of the step means it waits more than it
    #: works; below this busy share the step is not device-bound.
    overhead_device_busy_max_pct: float = 50.0
    #: Host ops (time blocked in syncs excluded) at least twice the device busy
    #: time: the CPU, not the device, sets the pace.
    overhead_cpu_over_device: float = 2.0
    #: Host ops covering less than this share of the step: the time went to code
    #: the profiler does not record as ops (Python, data loading, compilation).
    untraced_cpu_busy_max_pct: float = 25.0
    #: Device idle for three quarters of the step or more is the top problem.
    overhead_high_idle_pct: float = 75.0

    # -- 2. device idle gaps ----------------------------------------------------
    #: Shorter gaps are launch latency between back-to-back kernels (a launch
    #: costs ~5-20 µs), not something a user can act on.
    gap_min_us: float = 100.0
    #: ... and a gap must be a visible part of the step to be worth a line.
    gap_min_step_pct: float = 2.0
    #: A single gap of a tenth of the step is a clear stall ...
    gap_medium_step_pct: float = 10.0
    #: ... and of a third of the step the main one.
    gap_high_step_pct: float = 30.0
    #: Largest device-wide gaps reported per device.
    gaps_reported: int = 3
    #: A host event "explains" a gap when it covers at least this share of it.
    gap_explained_pct: float = 50.0
    #: Gaps of one device in different steps, with the same host call chain and
    #: sizes within this ratio (largest / smallest), are one repeating stall:
    #: reported once ("idle ~15.5 ms in each of steps 4–6"), not once per step.
    gap_merge_max_ratio: float = 1.25

    # -- 3. launch-bound --------------------------------------------------------
    #: Fewer kernels per step cannot make a step launch-bound in practice.
    launch_min_kernels_per_step: int = 50
    #: A device this busy hides tiny kernels behind queued work: info only.
    launch_busy_ok_pct: float = 80.0

    # -- 4. synchronisation points ----------------------------------------------
    #: Host time blocked in one cause's syncs of a tenth of the step is high ...
    sync_high_step_pct: float = 10.0
    #: ... from 1% on medium; below, the device had little queued work when the
    #: host waited, so the sync is cheap here (info, still worth knowing).
    sync_medium_step_pct: float = 1.0
    #: Distinct sync causes (op chain x call) reported, biggest first.
    sync_groups_reported: int = 6

    # -- 5. copies --------------------------------------------------------------
    #: Host->device copies below this size are typically constants or scalars
    #: built on the CPU each step, not input batches.
    copy_small_bytes: float = 64 * 1024
    #: ... and this many of them per step is a pattern, not a one-off.
    copy_small_min_per_step: float = 4.0
    #: Device->device copies taking this share of device busy time are worth
    #: removing (they are pure data movement).
    copy_dtod_medium_pct: float = 5.0
    #: Copies of any kind taking this share of the step are medium.
    copy_medium_step_pct: float = 5.0

    # -- 6. precision -----------------------------------------------------------
    #: float32 GEMMs/convolutions below this share of device time do not matter.
    precision_min_share_pct: float = 5.0
    #: ... and from this share on they are the main lever.
    precision_high_share_pct: float = 30.0

    # -- 7. variance ------------------------------------------------------------
    #: A median needs a few calls to mean anything.
    variance_min_calls: int = 5
    #: Max this far above the median of identical launches is not noise.
    variance_max_over_median: float = 3.0
    #: ... and the outlier must cost real time (max - median), not 2 µs vs 6 µs.
    variance_min_spread_us: float = 50.0
    #: Kernels reported (largest time above the median first).
    variance_reported: int = 3
    #: Time above the median at this share of device busy time is medium.
    variance_medium_pct: float = 5.0
    #: First step this much slower than the median of the others: cold start.
    cold_start_ratio: float = 1.5
    #: ... by at least a millisecond: below that the difference is timer and
    #: first-call jitter of tiny steps, not warm-up worth acting on.
    cold_start_min_excess_us: float = 1000.0

    # -- 9. distributed ---------------------------------------------------------
    #: Communication not hidden behind compute, as a share of the step.
    comm_exposed_min_pct: float = 5.0
    comm_exposed_high_pct: float = 25.0
    #: A rank whose step takes this much longer than the median rank's
    #: (ranks.py reads this too).
    straggler_ratio: float = 1.10
    straggler_high_ratio: float = 1.25

    # -- 10. short device bursts (XLA devices: TPU) -----------------------------
    #: Device work separated by less idle than this is one burst (an XLA
    #: program's ops follow each other within microseconds).
    burst_gap_us: float = 50.0
    #: This many bursts in one step means the step's program was split
    #: (a whole step normally runs as one or a few programs).
    burst_min_per_step: int = 8
    #: ... when the bursts are short: long ones are real programs, not pieces.
    burst_short_us: float = 200.0

    # -- 11. step-time variance (host and device) --------------------------------
    #: Steps needed to speak of variance (with fewer: "not checked").
    step_variance_min_steps: int = 2
    #: The slowest counted step this many times the fastest is not timer noise
    #: (timings on a shared machine wander by about 20%) ...
    step_variance_ratio: float = 1.5
    #: ... by at least this much (µs): sub-millisecond steps jitter by more
    #: than their own length on a busy machine.
    step_variance_min_excess_us: float = 1000.0

    # -- 12. many tiny ops, time outside ops (Python overhead) -----------------
    #: An op this short is mostly dispatcher and Python-binding cost (a CPU op
    #: call costs a few µs before any work), not computation.
    tiny_op_us: float = 10.0
    #: ... and this many of them per step is a Python loop over tensor
    #: elements or rows, not a model's normal handful of small ops.
    tiny_ops_min_per_step: float = 500.0
    #: Host ops covering less than this share of the step on the CPU: most of
    #: the step is Python, sleeps, I/O or waiting, which no op records.
    outside_ops_min_pct: float = 50.0
    #: ... and the uncovered time must be more than timer and step jitter.
    outside_ops_min_us: float = 1000.0

    # -- 13. CPU threads ------------------------------------------------------
    #: Ops (the time intra-op threads can split) covering at least this share
    #: of the step make a thread count below the usable cores worth a line.
    threads_min_op_pct: float = 30.0

    # -- 14. DataLoader -------------------------------------------------------
    #: Time in ``enumerate(DataLoader)#...__next__`` ranges from this share of
    #: the step on is a data-loading stall worth a line.
    dataloader_min_step_pct: float = 5.0

    # -- 15. host copies ------------------------------------------------------
    #: ``aten::copy_`` / ``to`` / ``contiguous`` / ``clone`` time on the host
    #: (copies that launch no device work) from this share of the step on.
    host_copy_min_step_pct: float = 5.0
    #: Copy families listed in the evidence, largest first.
    host_copy_reported: int = 5

    # -- linking ----------------------------------------------------------------
    #: Event rows kept per finding: enough to click through, small enough to keep
    #: the table light on million-event traces.
    max_event_rows: int = 2000


#: The defaults used by `Profile.findings`.
THRESHOLDS = Thresholds()
