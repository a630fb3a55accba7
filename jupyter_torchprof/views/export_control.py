"""The Export control of the inline view: pick a format, get a file and a download link.

This module draws the control; what the formats are, how files are named and
how they are written comes in as an `ExportMenu` (the `export_menu` module
plays it), because export sits above the views (it renders reports with them)
and views never import it.

The download link asks the kernel for the file over the view's own widget
messages (`views.surface.offer_download`): the page saves what the kernel
sends. That works in every host, in a browser on another machine than the
kernel, with no server route: JupyterLab's ``/files/``, VS Code, Colab and
marimo each resolve file links differently, or not at all.

Every problem is one line in the control: nothing is raised into the
notebook, and nothing half-written is left behind (see `export`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..format import esc

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile


class MenuChoice(Protocol):
    """One entry of the format menu, as the control reads it."""

    key: str
    label: str


class ExportMenu(Protocol):
    """What the control asks of the export side (`jupyter_torchprof.export_menu` answers)."""

    TOOLTIP: str

    def choices(self, profile: Profile) -> Sequence[MenuChoice]:
        """The formats offered for ``profile``; the first is the default."""
        ...

    def hint(self, profile: Profile, choice: MenuChoice, folder: str | Path | None) -> str:
        """The line beside the button: the file the click will write."""
        ...

    def start_line(self, profile: Profile, choice: MenuChoice) -> str:
        """What the control says while it writes."""
        ...

    def write(
        self, profile: Profile, choice: MenuChoice, folder: str | Path | None
    ) -> tuple[Path, list[str]]:
        """Write now: the file written and the messages for the user."""
        ...

    def shown_path(self, path: Path, folder: str | Path | None) -> str:
        """How a file is named to the user."""
        ...

    def human_size(self, n: float) -> str:
        """A byte count as people read file sizes."""
        ...

    def error_line(self, exc: BaseException) -> str:
        """One line for a failed export."""
        ...

    def after_write(self, choice: MenuChoice) -> list[str]:
        """Lines said after the file's own line."""
        ...


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
    menu
        The formats and the writing (`jupyter_torchprof.export_menu`).
    folder
        Where files go (default ``./torchprof-exports`` at the time of the
        click).
    """

    def __init__(self, profile: Profile, menu: ExportMenu, folder: str | Path | None = None) -> None:
        from . import ui as W

        self.profile = profile
        self.menu_of_formats = menu
        self.folder = folder
        self.choices = list(menu.choices(profile))
        self.written: list[Path] = []
        self.menu = W.Dropdown(
            options=[(c.label, c.key) for c in self.choices],
            value=self.choices[0].key,
            description="Export as",
            cls=["jp-TorchProf-export-format"],
        )
        self.button = W.Button(
            description="Export",
            tooltip=menu.TOOLTIP,
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
    def choice(self) -> MenuChoice:
        """The selected format."""
        return next(c for c in self.choices if c.key == self.menu.value)

    def _update_hint(self) -> None:
        text = self.menu_of_formats.hint(self.profile, self.choice, self.folder)
        self.hint.value = f'<span style="opacity:0.75">{esc(text)}</span>'

    def _show(self, lines: list[tuple[str, str]], plain: list[str]) -> None:
        self.result.value = _html_lines(lines)
        self.plain = "\n".join(plain)

    def run(self) -> Path | None:
        """Write the selected format now; returns the file written (None on error)."""
        menu, c = self.menu_of_formats, self.choice
        try:
            line = menu.start_line(self.profile, c)
            self._show([("", esc(line))], [line])
            path, messages = menu.write(self.profile, c, self.folder)
        except Exception as exc:  # noqa: BLE001 - every failure is one line in the control
            line = f"export failed: {menu.error_line(exc)}"
            self._show([("error", esc(line))], [line])
            return None
        self.written.append(path)
        lines: list[tuple[str, str]] = []
        plain: list[str] = []
        for msg in messages:
            lines.append(("warn" if msg.startswith("warning") else "", esc(msg)))
            plain.append(msg)
        size = menu.human_size(path.stat().st_size)
        shown = menu.shown_path(path, self.folder).removeprefix("./")
        from .surface import offer_download

        link = (
            f'<a href="#" data-download="{offer_download(path)}" download="{esc(path.name)}" '
            'class="jp-TorchProf-export-link" '
            f'style="color:var(--jp-content-link-color,#1976d2);text-decoration:underline">download {esc(path.name)}</a>'
        )
        lines.append(("", f"wrote {esc(shown)} ({esc(size)}) · {link}"))
        plain.append(f"wrote {shown} ({size})")
        for tip in menu.after_write(c):
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
