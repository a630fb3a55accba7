"""Writing a profile out: the trace for Perfetto, tables, text, a standalone report.

The format comes from the suffix of the path. A folder path writes every format.
Every file is written to a temporary name beside its target and renamed into
place, so a failure (a full disk, Ctrl-C) never leaves half a file behind; and
every problem is checked before the first byte is written.
"""

from __future__ import annotations

import gzip
import os
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import TorchProfError
from .safe_files import write_atomically

if TYPE_CHECKING:  # pragma: no cover
    from .results.comparison import Comparison
    from .results.profile import Profile

#: chrome://tracing refuses JSON documents much above this size.
CHROME_TRACING_LIMIT = 256 * 1024**2

#: Suffix → format name, longest suffixes first.
FORMATS = {
    ".json.gz": "trace-gz",
    ".json": "trace",
    ".csv": "csv",
    ".parquet": "parquet",
    ".html": "html",
    ".txt": "text",
}
TABLES = ("ops", "kernels")

#: What a folder export contains (file name, format).
FOLDER_CONTENTS = (
    ("trace.json.gz", "trace-gz"),
    ("ops.csv", "csv"),
    ("kernels.csv", "csv"),
    ("report.html", "html"),
    ("table.txt", "text"),
)


class ExportError(TorchProfError):
    """An export that cannot be done; nothing was written."""


@dataclass
class ExportResult:
    """Files an export wrote and what the user should know about them."""

    paths: list[Path] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(self.messages)


def format_of(path: Path) -> str | None:
    """The export format for a file path, from its suffix (None if unknown)."""
    name = path.name.lower()
    for suffix, fmt in FORMATS.items():
        if name.endswith(suffix):
            return fmt
    return None


def human_size(n: float) -> str:
    """A byte count as people read file sizes (decimal units: ``1.2 MB``)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def source_trace(profile: Profile) -> Path:
    """The trace file a profile came from, once a background compression has finished."""
    from .runs.store import trace_file, wait_for_compression

    wait_for_compression()
    path = profile.trace_path
    if path is not None and path.exists():
        return path
    if profile.run_dir is not None:
        found = trace_file(profile.run_dir)
        if found is not None:
            return found
    raise ExportError("this profile has no trace file to export (it was not captured or loaded from a file)")


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def json_size(path: Path) -> int:
    """Size of the trace's JSON once decompressed (read from the gzip trailer)."""
    if not _is_gzip(path):
        return path.stat().st_size
    with open(path, "rb") as fh:
        fh.seek(-4, os.SEEK_END)
        isize = struct.unpack("<I", fh.read(4))[0]
    # ISIZE is the size modulo 2**32; traces above 4 GB are rare enough that
    # the compressed size (a lower bound of 10x smaller) disambiguates them.
    compressed = path.stat().st_size
    while isize < compressed:
        isize += 2**32
    return isize


def _write_trace(profile: Profile, target: Path, gz: bool, result: ExportResult) -> None:
    src = source_trace(profile)
    size = json_size(src)
    src_gz = _is_gzip(src)
    result.messages.append(
        f"writing {target.name}: the Kineto trace as captured ({human_size(size)} of JSON"
        + (", gzip-compressed)" if gz else ")")
    )
    if size > CHROME_TRACING_LIMIT:
        result.messages.append(
            f"warning: {human_size(size)} of JSON is above what chrome://tracing opens (~256 MB); "
            "Perfetto (ui.perfetto.dev, or a self-hosted copy) opens it"
        )

    def write(tmp: Path) -> None:
        if gz == src_gz:
            shutil.copyfile(src, tmp)
        elif gz:
            with open(src, "rb") as fin, gzip.GzipFile(tmp, "wb", compresslevel=6, mtime=0) as fout:
                shutil.copyfileobj(fin, fout, 16 * 1024 * 1024)
        else:
            with gzip.open(src, "rb") as fin, open(tmp, "wb") as fout:
                shutil.copyfileobj(fin, fout, 16 * 1024 * 1024)

    write_atomically(target, write)


def _table(profile: Profile, table: str) -> Any:
    if table == "ops":
        return profile.ops
    if table == "kernels":
        return profile.kernels
    raise ExportError(f"--export-table must be one of {', '.join(TABLES)}, not {table!r}")


def _write_one(profile: Profile, target: Path, fmt: str, table: str, result: ExportResult) -> None:
    if fmt in ("trace", "trace-gz"):
        _write_trace(profile, target, fmt == "trace-gz", result)
    elif fmt == "csv":
        frame = _table(profile, table)
        write_atomically(target, lambda tmp: frame.to_csv(tmp, index=False))
        result.messages.append(f"writing {target.name}: the {table} table ({len(frame)} rows)")
    elif fmt == "parquet":
        frame = _table(profile, table)
        write_atomically(target, lambda tmp: frame.to_parquet(tmp, index=False))
        result.messages.append(f"writing {target.name}: the {table} table ({len(frame)} rows)")
    elif fmt == "text":
        text = profile.table(row_limit=-1, width=0)  # a file: every column, whatever the terminal
        write_atomically(target, lambda tmp: tmp.write_text(text + "\n", encoding="utf-8"))
        result.messages.append(f"writing {target.name}: the text tables")
    elif fmt == "html":
        from .views.report import report_html

        page = report_html(profile)
        write_atomically(target, lambda tmp: tmp.write_text(page, encoding="utf-8"))
        result.messages.append(
            f"writing {target.name}: a standalone report ({human_size(len(page))}, opens offline)"
        )
    else:  # pragma: no cover - format_of only returns known formats
        raise ExportError(f"unknown format {fmt}")
    result.paths.append(target)


def has_pyarrow() -> bool:
    """Whether Parquet can be written here (pandas needs pyarrow for it)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _check_parquet() -> None:
    if not has_pyarrow():
        raise ExportError("writing .parquet needs pyarrow (pip install pyarrow)")


def plan(path: str | Path, force: bool = False, table: str = "ops") -> list[tuple[Path, str, str]]:
    """What an export to ``path`` would write: (file, format, table) triples.

    Raises `ExportError` for every problem that can be known before writing:
    an unknown suffix, a missing parent folder, an existing file without
    ``force``, a folder that cannot be written.
    """
    if table not in TABLES:
        raise ExportError(f"--export-table must be one of {', '.join(TABLES)}, not {table!r}")
    p = Path(path).expanduser()
    if p.is_dir() or str(path).endswith(("/", os.sep)):
        if not p.exists():
            raise ExportError(f"folder {p} does not exist; create it first")
        contents = list(FOLDER_CONTENTS)
        if has_pyarrow():
            contents += [("ops.parquet", "parquet"), ("kernels.parquet", "parquet")]
        items = [
            (p / name, fmt, name.split(".")[0] if fmt in ("csv", "parquet") else table)
            for name, fmt in contents
        ]
        folder = p
    else:
        fmt = format_of(p)
        if fmt is None:
            suffix = "".join(p.suffixes) or "(none)"
            raise ExportError(
                f"unknown export format {suffix!r} for {p.name}; use .json, .json.gz, .csv, .parquet, "
                ".html, .txt, or a folder (writes them all)"
            )
        if fmt == "parquet":
            _check_parquet()
        folder = p.parent if str(p.parent) else Path(".")
        if not folder.exists():
            raise ExportError(f"folder {folder} does not exist; create it first")
        if not folder.is_dir():
            raise ExportError(f"{folder} is not a folder")
        items = [(p, fmt, table)]
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ExportError(f"cannot write into {folder}: permission denied")
    existing = [str(t) for t, _, _ in items if t.exists()]
    if existing and not force:
        raise ExportError(f"{', '.join(existing)} already exists; pass --force (force=True) to overwrite")
    return items


def export(profile: Profile, path: str | Path, force: bool = False, table: str = "ops") -> ExportResult:
    """Write ``profile`` to ``path`` in the format its suffix names.

    Parameters
    ----------
    profile
        What to export.
    path
        ``.json`` / ``.json.gz`` (the Kineto trace as captured: Perfetto and
        chrome://tracing open it), ``.csv`` / ``.parquet`` (a table),
        ``.html`` (a standalone report that opens offline), ``.txt`` (the
        text tables), or a folder (all of them; the trace gzip-compressed).
    force
        Overwrite existing files.
    table
        ``ops`` or ``kernels``: the table written to ``.csv`` / ``.parquet``.
    """
    items = plan(path, force=force, table=table)
    result = ExportResult()
    for target, fmt, tbl in items:
        try:
            _write_one(profile, target, fmt, tbl, result)
        except OSError as exc:
            raise ExportError(f"cannot write {target}: {exc.strerror or exc}") from None
    if len(items) > 1:
        _copy_device_files(profile, items[0][0].parent, result)
    return result


def _copy_device_files(profile: Profile, folder: Path, result: ExportResult) -> None:
    """A folder export keeps the device traces (XPlane, Neuron files) where the loader finds them again."""
    from .trace.files import device_files

    trace = profile.trace_path
    if trace is None:
        return
    copied = 0
    for src in device_files(trace, profile.meta.rank):
        target = folder / src.relative_to(trace.parent)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
        except OSError as exc:
            raise ExportError(f"cannot write {target}: {exc.strerror or exc}") from None
        result.paths.append(target)
        copied += 1
    if copied:
        result.messages.append(f"{copied} device trace file(s) copied beside the trace (load() finds them)")


def export_result(result: Any, path: str | Path, force: bool = False, table: str = "ops") -> list[str]:
    """Write a Profile, or both sides of a Comparison, to ``path``; the files written, as text.

    See `_export_parts`.
    """
    return [str(done) for done in _export_parts(result, path, force, table)]


def _export_parts(result: Any, path: str | Path, force: bool, table: str) -> list[ExportResult]:
    """Write a Profile, or both sides of a Comparison, to ``path``; one `ExportResult` per file group.

    A Profile goes to `export`. A Comparison (anything with ``eager`` and
    ``compiled``) writes one report with both sides and the diff for
    ``pair.html``; other suffixes write ``pair.eager.*`` and
    ``pair.compiled.*``; an existing folder gets ``eager/``, ``compiled/`` and
    ``comparison.html``. Refuses (ExportError, one line) before writing anything.
    """
    path = Path(path).expanduser()
    targets: list[tuple[Any, Path]] = []
    report: Path | None = None  # a Comparison's own report (both sides and the diff)
    if not hasattr(result, "eager"):
        if not callable(getattr(result, "export", None)):
            raise ExportError(
                "--export works for one profile (or --compare); export ranks one by one: ranks[0].export(...)"
            )
        targets.append((result, path))
    elif not path.is_dir() and path.name.lower().endswith(".html"):
        report = path
    else:
        report = path / "comparison.html" if path.is_dir() else None
        for label, side in (("eager", result.eager), ("compiled", result.compiled)):
            if side is None:
                continue
            if path.is_dir():
                sub = path / label
                sub.mkdir(exist_ok=True)
                targets.append((side, sub))
            else:
                stem, dot, rest = path.name.partition(".")
                targets.append((side, path.with_name(f"{stem}.{label}{dot}{rest}")))
    if report is not None:
        plan(report, force=force)  # refuse before writing anything
    done = [side.export(target, force=force, table=table) for side, target in targets]
    if report is not None:
        done.append(write_report(result, report, force=force))
    return done


def export_comparison(
    comparison: Comparison, path: str | Path, force: bool = False, table: str = "ops"
) -> ExportResult:
    """`Comparison.export`: both sides and the diff report, as `export_result` writes them; one `ExportResult`."""
    out = ExportResult()
    for done in _export_parts(comparison, path, force, table):
        out.paths += done.paths
        out.messages += done.messages
    return out


def write_report(result: Profile | Comparison, path: str | Path, force: bool = False) -> ExportResult:
    """Write `report_html` of ``result`` to the ``.html`` file ``path``.

    The checks and the atomic write are those of `export.export`: an
    existing file is kept unless ``force``, and a failure leaves nothing
    half-written.
    """
    from .views.report import report_html

    ((target, fmt, _),) = plan(path, force=force)
    if fmt != "html":
        raise ExportError(f"a report is written to an .html file, not {Path(path).name}")
    page = report_html(result)
    try:
        write_atomically(target, lambda tmp: tmp.write_text(page, encoding="utf-8"))
    except OSError as exc:
        raise ExportError(f"cannot write {target}: {exc.strerror or exc}") from None
    what = "a comparison report" if hasattr(result, "compiled") else "a standalone report"
    return ExportResult([target], [f"writing {target.name}: {what} ({human_size(len(page))}, opens offline)"])
