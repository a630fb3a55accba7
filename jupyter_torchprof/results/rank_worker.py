"""A worker process that parses rank traces for `parallel`, and the handle that drives it.

The worker is a fresh interpreter (``python -c BOOTSTRAP``) that imports
this package and nothing of the program that started it. multiprocessing's
``spawn`` would import the parent's ``__main__`` in every worker: a plain
script that calls ``load(folder)`` at its top level (no
``if __name__ == "__main__":`` guard) then ran its load again in each
worker, which either recursed or failed with a traceback on the user's
terminal. A notebook kernel's workers also skip importing
``ipykernel_launcher``.

Parent and worker speak pickles over the worker's stdin and stdout:

* the parent sends ``sys.path`` first (so the worker finds the same copy of
  this package and of its dependencies as the parent), then requests
  ``("digest", path, parts, storage_options)`` or ``("ping",)``;
* the worker answers ``("ready", pid)`` once its imports are done, then
  ``("ok", result)`` or ``("error", exception)`` per request.

The worker exits when its stdin closes (the parent let it go, or died),
within a second of the parent's death while it parses (it watches its
parent), and never on a Ctrl-C meant for the parent (a terminal sends
SIGINT to the whole process group; the parent decides what to stop).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
import traceback
from typing import IO, Any

#: What the worker runs first, before any import of ours: ignore Ctrl-C,
#: take the parent's sys.path, then serve.
BOOTSTRAP = (
    "import signal, sys, pickle\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "sys.path[:] = pickle.load(sys.stdin.buffer)\n"
    "from jupyter_torchprof.results.rank_worker import serve\n"
    "serve()\n"
)


class WorkerDied(RuntimeError):
    """The worker process exited (killed, out of memory) before it answered."""


class Worker:
    """One worker process, driven by one thread of the parent at a time.

    Parameters
    ----------
    executable
        The Python to run (default: this one).
    """

    def __init__(self, executable: str | None = None) -> None:
        self.proc = subprocess.Popen(
            [executable or sys.executable, "-c", BOOTSTRAP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # close_fds (the default) keeps other workers' pipes out of this one,
            # so a worker sees EOF as soon as the parent closes its end.
        )
        self.pid = self.proc.pid
        self.started = False
        self._send(list(sys.path))

    def _send(self, obj: Any) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            pickle.dump(obj, stdin, protocol=pickle.HIGHEST_PROTOCOL)
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:  # ValueError: closed by close()
            raise WorkerDied(f"worker process {self.pid} is gone") from exc

    def _receive(self) -> tuple[str, Any]:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            return pickle.load(stdout)
        except (EOFError, OSError, ValueError, pickle.UnpicklingError) as exc:
            code = self.proc.poll()
            raise WorkerDied(f"worker process {self.pid} exited (exit code {code})") from exc

    def wait_started(self) -> None:
        """Return once the worker has imported the parser (at once if it had); raises `WorkerDied`."""
        if not self.started:
            kind, _ = self._receive()
            if kind != "ready":
                raise WorkerDied(f"worker process {self.pid} said {kind!r} instead of starting")
            self.started = True

    def ping(self) -> bool:
        """Whether a started worker still answers (a kept worker may have been killed since)."""
        try:
            self.wait_started()
            self._send(("ping",))
            return self._receive()[0] == "pong"
        except WorkerDied:
            return False

    def call(self, path: str, parts: tuple[str, ...], storage_options: dict[str, Any] | None = None) -> Any:
        """The worker's `remote_rank.digest_source` of ``path`` (a file, or a URL it fetches); its exception re-raised here."""
        self.wait_started()
        self._send(("digest", path, parts, storage_options))
        kind, value = self._receive()
        if kind == "error":
            raise value
        return value

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc.poll() is None

    def kill(self) -> None:
        """Stop the worker at once, from any thread (the thread driving it then sees `WorkerDied`)."""
        if self.alive():
            self.proc.kill()

    def close(self, kill: bool = False) -> None:
        """Let the worker go: it exits once it reads EOF (``kill``: at once, even mid-parse)."""
        if kill:
            self.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:  # a broken pipe to a dead worker: nothing left to flush
                pass


def _exit_with_parent(parent: int) -> None:
    """Exit within a second of the parent's death, even in the middle of a parse.

    A worker blocked reading its stdin sees EOF when the parent dies, but one
    busy parsing a big rank would go on for minutes, holding its memory.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="torchprof-exit-with-parent", daemon=True).start()


def _answer(request: tuple[Any, ...]) -> tuple[str, Any]:
    from .remote_rank import digest_source

    if request[0] == "ping":
        return ("pong", None)
    try:
        return ("ok", digest_source(request[1], tuple(request[2]), request[3]))
    except Exception as exc:  # a bug: the parent re-raises it, the worker serves on
        try:
            pickle.loads(pickle.dumps(exc))  # some exceptions pickle but do not unpickle
        except Exception:
            exc = RuntimeError("".join(traceback.format_exception(exc)))
        return ("error", exc)


def serve(stdin: IO[bytes] | None = None) -> None:
    """The worker's loop: answer requests until stdin closes."""
    stdin = stdin or sys.stdin.buffer
    # The answers travel on fd 1: anything else printing there (a library's
    # print) would corrupt them, so it goes to stderr from now on.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _exit_with_parent(os.getppid())
    from . import profile  # noqa: F401 - the imports a rank needs, done before "ready"

    try:
        _send(out, ("ready", os.getpid()))
        while True:
            try:
                request = pickle.load(stdin)
            except (EOFError, OSError):
                return
            _send(out, _answer(request))
    except BrokenPipeError:
        # The parent is gone or let this worker go while it started (a script
        # that exits right after its load): leave without a traceback.
        os._exit(0)


def _send(out: IO[bytes], message: tuple[str, Any]) -> None:
    pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()
