"""The findings of a Profile read its events frame less ``device_depth``: same findings, no device nesting walk."""

from __future__ import annotations

import pytest
from tracefiles import assert_same_findings, real_trace

from jupyter_torchprof.analysis import tree as tree_mod
from jupyter_torchprof.analysis.findings import find, inputs_from_profile
from jupyter_torchprof.results.profile import Profile

TRACES = ["v100_ddp_ns_timestamps.pt.trace.json.gz", "cuda_event_sync_multi_stream.pt.trace.json.gz"]


@pytest.mark.parametrize("name", TRACES)
def test_findings_without_the_events_table_equal_those_with_it(name, monkeypatch) -> None:
    walks: list[int] = []
    real = tree_mod.device_depth
    monkeypatch.setattr(tree_mod, "device_depth", lambda *a, **k: walks.append(1) or real(*a, **k))
    fast = Profile.from_file(real_trace(name))
    got = fast.findings
    assert walks == [] and "events" not in fast.__dict__  # no device nesting walk for the findings
    slow = Profile.from_file(real_trace(name))
    events = slow.events  # made first: the findings then read it
    assert walks == [1]
    inputs = inputs_from_profile(slow)
    assert inputs.events is events
    assert_same_findings(got, find(inputs))
    assert list(inputs_from_profile(fast).events.columns) == [
        c for c in events.columns if c != "device_depth"
    ]


def test_a_duck_typed_profile_without_the_frame_gives_its_events(monkeypatch) -> None:
    p = Profile.from_file(real_trace(TRACES[0]))

    class Duck:
        def __getattr__(self, name):
            if name == "_findings_events":
                raise AttributeError(name)
            return getattr(p, name)

    assert inputs_from_profile(Duck()).events is p.events
