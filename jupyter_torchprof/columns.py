"""The column catalog: what each table's columns are called, in every renderer.

Every view (text, static HTML, the report, the bokeh tables, the sidebar
through the server) takes titles, units and formats from here, and the
sort keys a user may type resolve here.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Sort keys a user may type (``--sort``, ``Profile.table(sort=)``) and the op-table column each names.
SORT_ALIASES = {
    "self_cpu": "self_cpu_us",
    "cpu_total": "cpu_total_us",
    "cpu": "cpu_total_us",
    "self_device": "self_device_us",
    "device_total": "device_total_us",
    "device": "device_total_us",
    "self_cuda": "self_device_us",
    "cuda_total": "device_total_us",
    "calls": "calls",
    "count": "calls",
    "flops": "flops",
    "self_cpu_memory": "self_cpu_mem_bytes",
    "self_device_memory": "self_device_mem_bytes",
}


def sort_column(key: str, columns: Iterable[str]) -> str:
    """The op-table column a sort key names (``self_cpu``, ``device_total``, a column name...).

    Raises ValueError naming the keys to choose from when ``columns`` lacks it.
    """
    k = key.strip().lower().replace("-", "_").replace(" ", "_")
    for suffix in ("_time_total",):
        if k.endswith(suffix):
            k = k[: -len(suffix)]
    col = SORT_ALIASES.get(k, k)
    if col not in set(columns):
        choices = ", ".join(sorted(set(SORT_ALIASES)))
        raise ValueError(f"cannot sort by {key!r}; choose one of: {choices}")
    return col
