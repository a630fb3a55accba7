"""What the inline view's Export menu offers and does: formats, file names, writing.

The view (`views.export_control`) draws the menu, the button and the lines
that say what happened; everything that knows about files lives here, on the
export side, and reaches the view as an argument (views never import export:
export renders reports with the views, so the other direction would be a
circle).

Files go into ``torchprof-exports/`` under the kernel's working directory (the
notebook's folder, unless the notebook changed it), named after the run; an
existing file is never overwritten: the new one gets a counter suffix
(``run-2.json.gz``). The trace is gzip-compressed by default, its size is
said before it is written, and a trace above what chrome://tracing opens
(~256 MB of JSON) gets export's warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .export import (
    CHROME_TRACING_LIMIT,
    ExportError,
    ExportResult,
    export,
    has_pyarrow,
    human_size,
    json_size,
    source_trace,
)
from .format import fmt_count

if TYPE_CHECKING:  # pragma: no cover
    from .results.profile import Profile

#: Folder (under the working directory) that exports from the view go to.
EXPORT_DIR = "torchprof-exports"
#: Counter suffixes tried before giving up on a free file name.
MAX_COUNTER = 10_000


@dataclass(frozen=True)
class Choice:
    """One entry of the format menu.

    Attributes
    ----------
    key
        Stable id (``trace-gz``, ``ops-csv`` ...).
    label
        What the menu shows.
    suffix
        File suffix, which is what selects the format in `export.export`.
    table
        ``ops`` or ``kernels`` for ``.csv`` / ``.parquet``.
    part
        Added to the file stem (``.ops``, ``.kernels``) so tables do not
        collide with each other.
    """

    key: str
    label: str
    suffix: str
    table: str = "ops"
    part: str = ""

    @property
    def is_trace(self) -> bool:
        """True for the Kineto trace (``.json`` / ``.json.gz``)."""
        return self.suffix in (".json", ".json.gz")


def choices(profile: Profile) -> list[Choice]:
    """The formats offered for ``profile`` (kernel tables only when it has kernels).

    The gzip-compressed trace comes first: it is the default.
    """
    kernels = bool(profile.summary.get("device_traced")) and not profile.kernels.empty
    out = [
        Choice("trace-gz", "trace (.json.gz) · Perfetto, chrome://tracing", ".json.gz"),
        Choice("trace", "trace, uncompressed (.json)", ".json"),
        Choice("ops-csv", "op table (.csv)", ".csv", "ops", ".ops"),
    ]
    if kernels:
        out.append(Choice("kernels-csv", "kernel table (.csv)", ".csv", "kernels", ".kernels"))
    if has_pyarrow():
        out.append(Choice("ops-parquet", "op table (.parquet)", ".parquet", "ops", ".ops"))
        if kernels:
            out.append(
                Choice("kernels-parquet", "kernel table (.parquet)", ".parquet", "kernels", ".kernels")
            )
    out += [
        Choice("html", "report (.html) · opens offline", ".html"),
        Choice("text", "text tables (.txt)", ".txt"),
    ]
    return out


_TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".gz")


def file_stem(name: str) -> str:
    """A file-name-safe stem from a run name (``y = m(x)`` → ``y-m-x``).

    A loaded trace's name loses its trace suffix, so that exporting
    ``rank0.pt.trace.json.gz`` as a trace does not give ``….json.gz.json.gz``.
    """
    base = Path(str(name)).name
    for suffix in _TRACE_SUFFIXES:
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", base).strip("-.")
    stem = re.sub(r"-{2,}", "-", stem)[:80].rstrip("-.")
    return stem or "profile"


def run_stem(profile: Profile) -> str:
    """The file stem of a profile's exports: its name, and its run id when it has one.

    Names come from the cell's first line, so two runs of one cell (or of two
    cells that start alike) would share a name; the run id tells them apart.
    """
    stem = file_stem(profile.name)
    if profile.run_dir is not None and profile.run_dir.name:
        stem = f"{stem[:56]}-{file_stem(profile.run_dir.name)}"
    return stem


def export_folder(folder: str | Path | None) -> Path:
    """Where the menu writes: ``folder``, or ``./torchprof-exports`` at the time of asking."""
    return Path(folder) if folder is not None else Path.cwd() / EXPORT_DIR


def next_free(folder: Path, stem: str, suffix: str) -> Path:
    """``folder/stem+suffix``, or with ``-2``, ``-3`` ... when that exists."""
    target = folder / f"{stem}{suffix}"
    n = 2
    while target.exists():
        if n > MAX_COUNTER:
            raise ExportError(f"{folder} already holds {MAX_COUNTER} exports named {stem}*{suffix}")
        target = folder / f"{stem}-{n}{suffix}"
        n += 1
    return target


def trace_json_size(profile: Profile) -> int | None:
    """Size of the trace as JSON, without waiting for a background compression (None if unknown)."""
    from .runs.store import trace_file

    candidates = [profile.trace_path]
    if profile.run_dir is not None:
        candidates.append(trace_file(profile.run_dir))
    for path in candidates:
        try:
            if path is not None and path.exists():
                return json_size(path)
        except OSError:
            continue
    return None


def export_into(
    profile: Profile, choice: Choice, folder: str | Path | None = None
) -> tuple[Path, ExportResult]:
    """Write ``profile`` in the format of ``choice`` into ``folder``, never overwriting.

    Parameters
    ----------
    profile
        What to export.
    choice
        One of `choices`.
    folder
        Where to write (default ``./torchprof-exports``; created if missing).

    Returns
    -------
    (path written, export's result with its messages)

    Raises
    ------
    ExportError
        With one line saying what went wrong; nothing is left half-written.
    """
    target_dir = export_folder(folder)
    if target_dir.exists() and not target_dir.is_dir():
        raise ExportError(f"{target_dir} is a file, not a folder: move it away to export here")
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create {target_dir}: {exc.strerror or exc}") from None
    stem = run_stem(profile) + choice.part
    # Another export (another view, another kernel) may take the name between
    # looking and writing; export refuses to overwrite, so try the next one.
    for _ in range(5):
        target = next_free(target_dir, stem, choice.suffix)
        try:
            return target, export(profile, target, force=False, table=choice.table)
        except ExportError as exc:
            if "already exists" not in str(exc):
                raise
    raise ExportError(f"could not find a free file name for {stem}{choice.suffix} in {target_dir}")


# --------------------------------------------------------------------------- #
# what the view's control asks (`views.export_control.ExportMenu`)

#: The button's tooltip.
TOOLTIP = f"write the file into ./{EXPORT_DIR}/ and show a download link"


def next_path(profile: Profile, choice: Choice, folder: str | Path | None) -> Path:
    """The file the next click writes (the first free name, as `export_into` picks it)."""
    where = export_folder(folder)
    stem = run_stem(profile) + choice.part
    if not where.is_dir():
        return where / f"{stem}{choice.suffix}"
    try:
        return next_free(where, stem, choice.suffix)
    except Exception:  # noqa: BLE001 - a hint; the click says what is wrong
        return where / f"{stem}{choice.suffix}"


def shown_path(path: Path, folder: str | Path | None) -> str:
    """How a written or promised file is named to the user (relative under the default folder)."""
    return f"./{EXPORT_DIR}/{path.name}" if folder is None else str(path)


def hint(profile: Profile, choice: Choice, folder: str | Path | None) -> str:
    """The line beside the button: the file the click writes, and its size or row count."""
    text = f"→ {shown_path(next_path(profile, choice, folder), folder)}"
    if choice.is_trace:
        size = trace_json_size(profile)
        if size is not None:
            text += f" · {human_size(size)} of JSON" + (
                ", gzip-compressed on disk" if choice.suffix.endswith(".gz") else ""
            )
            if size > CHROME_TRACING_LIMIT:
                text += " · above what chrome://tracing opens (~256 MB): use Perfetto"
    elif choice.table == "kernels" and choice.part:
        text += f" · {fmt_count(len(profile.kernels))} rows"
    elif choice.part:
        text += f" · {fmt_count(len(profile.ops))} rows"
    return text


def start_line(profile: Profile, choice: Choice) -> str:
    """What the control says while it writes (a big trace takes a while: its size first)."""
    if not choice.is_trace:
        return f"writing {choice.label} …"
    size = json_size(source_trace(profile))
    return f"writing the trace: {human_size(size)} of JSON" + (
        ", gzip-compressed …" if choice.suffix.endswith(".gz") else " …"
    )


def write(profile: Profile, choice: Choice, folder: str | Path | None) -> tuple[Path, list[str]]:
    """Write the file now: the path written and the messages for the user (`ExportError` if none)."""
    path, result = export_into(profile, choice, folder)
    return path, list(result.messages)


def error_line(exc: BaseException) -> str:
    """One line for a failed export: export's own message, or the exception's type and first line."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(exc, ExportError):
        return first or "export failed"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def after_write(choice: Choice) -> list[str]:
    """Lines said after the file's own line (how to see an HTML report inside JupyterLab)."""
    if choice.suffix != ".html":
        return []
    return [
        "JupyterLab opens HTML files with scripts off: click Trust HTML in its toolbar "
        "(or open the file in a browser tab) to see the timeline"
    ]
