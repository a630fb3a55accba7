"""The Export control of the inline view: pick a format, get a file and a download link.

Files go into ``torchprof-exports/`` under the kernel's working directory (the
notebook's folder, unless the notebook changed it), named after the run; an
existing file is never overwritten: the new one gets a counter suffix
(``run-2.json.gz``). The trace is gzip-compressed by default, its size is
said before it is written, and a trace above what chrome://tracing opens
(~256 MB of JSON) gets export's warning.

The download link asks the kernel for the file over the view's own widget
messages (`views.surface.offer_download`): the page saves what the kernel
sends. That works in every host, in a browser on another machine than the
kernel, with no server route: JupyterLab's ``/files/``, VS Code, Colab and
marimo each resolve file links differently, or not at all.

Every problem is one line in the control: nothing is raised into the
notebook, and nothing half-written is left behind (see `export`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..format import esc, fmt_count

if TYPE_CHECKING:  # pragma: no cover
    from ..export import ExportResult
    from ..results.profile import Profile

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


def _has_pyarrow() -> bool:
    from ..export import has_pyarrow as has

    return has()


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
    if _has_pyarrow():
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
    """Where the control writes: ``folder``, or ``./torchprof-exports`` at the time of asking."""
    return Path(folder) if folder is not None else Path.cwd() / EXPORT_DIR


def next_free(folder: Path, stem: str, suffix: str) -> Path:
    """``folder/stem+suffix``, or with ``-2``, ``-3`` ... when that exists."""
    target = folder / f"{stem}{suffix}"
    n = 2
    while target.exists():
        if n > MAX_COUNTER:
            from ..export import ExportError

            raise ExportError(f"{folder} already holds {MAX_COUNTER} exports named {stem}*{suffix}")
        target = folder / f"{stem}-{n}{suffix}"
        n += 1
    return target


def trace_json_size(profile: Profile) -> int | None:
    """Size of the trace as JSON, without waiting for anything (None if unknown)."""
    from ..export import json_size

    candidates = [profile.trace_path]
    if profile.run_dir is not None:
        from ..store import trace_file

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
    from ..export import ExportError, export

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


def _human(n: float) -> str:
    from ..export import human_size as human

    return human(n)


# --------------------------------------------------------------------------- #
# the widget


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    from ..export import ExportError

    if isinstance(exc, ExportError):
        return first or "export failed"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


_LINE = "margin:1px 0;font-size:var(--jp-ui-font-size1,13px);"


def _html_lines(lines: list[tuple[str, str]]) -> str:
    """``(kind, html)`` pairs as one block; kind is ``""``, ``warn`` or ``error``."""
    colour = {
        "warn": "color:var(--jp-warn-color0,#a15c00);",
        "error": "color:var(--jp-error-color1,#b00020);",
        "": "",
    }
    rows = "".join(
        f'<div class="jp-TorchProf-export-line{" jp-TorchProf-export-" + k if k else ""}" '
        f'style="{_LINE}{colour[k]}">{h}</div>'
        for k, h in lines
    )
    return f'<div class="jp-TorchProf-export-result">{rows}</div>'


class ExportControl:
    """Export control: a format menu, an Export button, what was written, a link.

    Use `box` (a `views.ui` node) in a view.

    Parameters
    ----------
    profile
        The profile to export.
    folder
        Where files go (default ``./torchprof-exports`` at the time of the
        click).
    """

    def __init__(self, profile: Profile, folder: str | Path | None = None) -> None:
        from . import ui as W

        self.profile = profile
        self.folder = folder
        self.choices = choices(profile)
        self.written: list[Path] = []
        self.menu = W.Dropdown(
            options=[(c.label, c.key) for c in self.choices],
            value=self.choices[0].key,
            description="Export as",
            cls=["jp-TorchProf-export-format"],
        )
        self.button = W.Button(
            description="Export",
            tooltip=f"write the file into ./{EXPORT_DIR}/ and show a download link",
            cls=["jp-TorchProf-button", "jp-TorchProf-export-button"],
        )
        self.hint = W.HTML(cls=["jp-TorchProf-export-hint"])
        self.result = W.HTML(cls=["jp-TorchProf-export-output"])
        self.menu.observe(lambda _: self._update_hint(), "value")
        self.button.on_click(lambda _: self.run())
        self._update_hint()
        row = W.HBox([self.menu, self.button, self.hint], cls=["jp-TorchProf-controls"])
        self.box = W.VBox([row, self.result], cls=["jp-TorchProf-export"])
        #: Plain text of what the control shows last (what a terminal would print).
        self.plain = ""

    @property
    def choice(self) -> Choice:
        """The selected format."""
        return next(c for c in self.choices if c.key == self.menu.value)

    def next_path(self) -> Path:
        """The file the next click writes (the first free name, as `export_into` picks it)."""
        c = self.choice
        folder = export_folder(self.folder)
        stem = run_stem(self.profile) + c.part
        if not folder.is_dir():
            return folder / f"{stem}{c.suffix}"
        try:
            return next_free(folder, stem, c.suffix)
        except Exception:  # noqa: BLE001 - a hint; the click says what is wrong
            return folder / f"{stem}{c.suffix}"

    def _update_hint(self) -> None:
        c = self.choice
        target = self.next_path()
        shown = f"./{EXPORT_DIR}/{target.name}" if self.folder is None else str(target)
        text = f"→ {shown}"
        if c.is_trace:
            size = trace_json_size(self.profile)
            if size is not None:
                from ..export import CHROME_TRACING_LIMIT

                text += f" · {_human(size)} of JSON" + (
                    ", gzip-compressed on disk" if c.suffix.endswith(".gz") else ""
                )
                if size > CHROME_TRACING_LIMIT:
                    text += " · above what chrome://tracing opens (~256 MB): use Perfetto"
        elif c.table == "kernels" and c.part:
            text += f" · {fmt_count(len(self.profile.kernels))} rows"
        elif c.part:
            text += f" · {fmt_count(len(self.profile.ops))} rows"
        self.hint.value = f'<span style="opacity:0.75">{esc(text)}</span>'

    def _show(self, lines: list[tuple[str, str]], plain: list[str]) -> None:
        self.result.value = _html_lines(lines)
        self.plain = "\n".join(plain)

    def run(self) -> Path | None:
        """Write the selected format now; returns the file written (None on error)."""
        c = self.choice
        try:
            if c.is_trace:
                # Say the size before writing: a big trace takes a while.
                from ..export import json_size, source_trace

                size = json_size(source_trace(self.profile))
                line = f"writing the trace: {_human(size)} of JSON" + (
                    ", gzip-compressed …" if c.suffix.endswith(".gz") else " …"
                )
                self._show([("", esc(line))], [line])
            else:
                self._show([("", esc(f"writing {c.label} …"))], [f"writing {c.label} …"])
            path, result = export_into(self.profile, c, self.folder)
        except Exception as exc:  # noqa: BLE001 - every failure is one line in the control
            line = f"export failed: {_one_line(exc)}"
            self._show([("error", esc(line))], [line])
            return None
        self.written.append(path)
        lines: list[tuple[str, str]] = []
        plain: list[str] = []
        for msg in result.messages:
            kind = "warn" if msg.startswith("warning") else ""
            lines.append((kind, esc(msg)))
            plain.append(msg)
        size = path.stat().st_size
        shown = f"{EXPORT_DIR}/{path.name}" if self.folder is None else str(path)
        from .surface import offer_download

        link = (
            f'<a href="#" data-download="{offer_download(path)}" download="{esc(path.name)}" '
            'class="jp-TorchProf-export-link" '
            f'style="color:var(--jp-content-link-color,#1976d2);text-decoration:underline">download {esc(path.name)}</a>'
        )
        lines.append(("", f"wrote {esc(shown)} ({esc(_human(size))}) · {link}"))
        plain.append(f"wrote {shown} ({_human(size)})")
        if c.suffix == ".html":
            tip = (
                "JupyterLab opens HTML files with scripts off: click Trust HTML in its toolbar "
                "(or open the file in a browser tab) to see the timeline"
            )
            lines.append(("", esc(tip)))
            plain.append(tip)
        self._show(lines, plain)
        # The next click writes the next free name: say that one, not this one.
        self._update_hint()
        return path

    def close(self) -> None:
        """Let go of the control's callbacks."""
        from .ui import walk

        for node in walk(self.box):
            node.close()
