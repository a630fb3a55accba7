"""The cell body of %%torchprof is filed under the number the notebook shows (In[N])."""

from __future__ import annotations


def test_the_magics_body_is_filed_under_its_cells_number(shell):
    shell.run_cell("x = 1", store_history=True)
    res = shell.run_cell("%%torchprof --steps 1 -q\nraise ValueError('boom')", store_history=True)
    assert isinstance(res.error_in_exec, ValueError)
    number = res.execution_count
    # IPython names cells in tracebacks by their file's number in its compile
    # cache: the cell itself and the magic's body are both filed under it.
    fmap = shell.compile._filename_map
    body = [name for name, n in fmap.items() if n == number]
    assert len(body) == 2, fmap
    assert number + 1 not in fmap.values()
