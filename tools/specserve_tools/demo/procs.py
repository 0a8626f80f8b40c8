"""Every process the demo starts, in its own process group, so one call stops all of them and their children.

Also the step names: a failure anywhere is reported as "step 'NAME' failed: ..." by the runner."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path


class StepFailedError(Exception):
    def __init__(self, step: str, message: str) -> None:
        self.step = step
        super().__init__(f"step '{step}' failed: {message}")


INTERRUPTED_IN: list[str] = []  # the step that Ctrl-C or SIGTERM cancelled (for "interrupted during step ...")


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """Names the step a failure belongs to (the first name wins when steps nest)."""
    try:
        yield
    except (asyncio.CancelledError, KeyboardInterrupt):
        INTERRUPTED_IN.append(name)
        raise
    except StepFailedError:
        raise
    except Exception as exc:
        raise StepFailedError(name, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])


@dataclass
class Supervisor:
    """Starts children with start_new_session (their own process group) and kills the groups on stop()."""

    log_dir: Path
    children: list[Child] = field(default_factory=list)
    started: list[int] = field(default_factory=list)  # every pid ever started (tests check none is left)

    def __post_init__(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop_all_now)  # the last resort: an exit path that skipped the finally blocks

    def start(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> Child:
        log = self.log_dir / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        child = Child(name, proc, log)
        self.children.append(child)
        self.started.append(proc.pid)
        return child

    async def stop(self, child: Child, grace: float = 5.0) -> None:
        """SIGTERM the child's group, SIGKILL what is left after `grace` seconds."""
        _signal_group(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while child.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        _signal_group(child.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.proc.wait(timeout=2)
        if child in self.children:
            self.children.remove(child)

    async def stop_all(self, grace: float = 5.0) -> None:
        await asyncio.gather(*(self.stop(c, grace) for c in list(reversed(self.children))))

    def stop_all_now(self) -> None:
        """Synchronous and immediate (atexit, signal handlers): SIGKILL every group."""
        for child in list(self.children):
            _signal_group(child.pid, signal.SIGTERM)
        time.sleep(0.2)
        for child in list(self.children):
            _signal_group(child.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=2)
        self.children.clear()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # start_new_session: the group id is the child's pid


def group_alive(pid: int) -> bool:
    """True while any process of the group `pid` exists (tests: nothing left behind)."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
