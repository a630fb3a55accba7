"""Wheel build hook: compile the native trace scanner into the wheel when a C compiler is there.

Without a compiler (or with ``TORCHPROF_NATIVE_BUILD=0``) the wheel is built
anyway, pure Python; the installed package then compiles the scanner on first
use if a compiler turns up later, or parses with its pure-Python path, which
gives the same results (see ``jupyter_torchprof/trace/native``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

NATIVE = Path("jupyter_torchprof") / "trace" / "native"


class NativeScannerHook(BuildHookInterface):
    """Builds ``_scan-<tag>.so`` and force-includes it next to ``scan.c`` in the wheel."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile the scanner (wheels only; editable installs compile on first use)."""
        self._tmp: str | None = None
        if self.target_name != "wheel" or version == "editable":
            return
        if os.environ.get("TORCHPROF_NATIVE_BUILD", "1").strip() == "0":
            return
        spec = importlib.util.spec_from_file_location(
            "_torchprof_native", Path(self.root) / NATIVE / "__init__.py"
        )
        loader = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loader)
        self._tmp = tempfile.mkdtemp(prefix="torchprof-native-")
        built = loader.build(Path(self._tmp))
        if built is None:
            self.app.display_warning(
                "jupyter_torchprof: no working C compiler (cc/gcc/clang or $CC); the trace parser "
                "will use its pure-Python path (same results, slower)"
            )
            return
        build_data["force_include"][str(built)] = str(NATIVE / built.name)
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        """Remove the temporary build folder."""
        if getattr(self, "_tmp", None):
            shutil.rmtree(self._tmp, ignore_errors=True)
