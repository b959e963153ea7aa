"""Progress bars for amped.cp: tqdm when it is installed, else one line of
its own on standard error. One bar per phase of the run (loading,
uploading, ..., iterations), each replaced by the next."""
from __future__ import annotations

import sys
import time
from typing import Any, Optional, TextIO

__all__ = ["ProgressBar", "make_bar"]

# Phases whose done/total count bytes.
_BYTE_PHASES = {"loading", "uploading"}


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


class ProgressBar:
    """The bars of one run. update() takes each amped_progress report
    (phase, done, total, iteration, fit); close() ends the last bar."""

    def __init__(self, iters_hint: Optional[int] = None, stream: Optional[TextIO] = None) -> None:
        self.iters_hint = iters_hint
        self.stream = stream if stream is not None else sys.stderr
        self.phase: Optional[str] = None
        self._bar: Any = None
        self._last_draw = 0.0
        self._line_len = 0
        try:
            import tqdm  # noqa: F401
            self._tqdm: Any = tqdm.tqdm
        except Exception:
            self._tqdm = None

    # ---- one bar per phase --------------------------------------------------
    def _start(self, phase: str, total: int) -> None:
        self._end_bar()
        self.phase = phase
        label = "iterations" if phase == "iteration" else phase
        if phase == "iteration" and not total:
            total = self.iters_hint or 0
        if self._tqdm is not None:
            kw = dict(desc=label, total=total or None, file=self.stream, leave=True,
                      dynamic_ncols=True)
            if phase in _BYTE_PHASES:
                kw.update(unit="B", unit_scale=True, unit_divisor=1024)
            elif phase == "iteration":
                kw.update(unit="it")
            self._bar = self._tqdm(**kw)
        else:
            self._bar = {"label": label, "total": total, "done": 0, "extra": ""}
            self._last_draw = 0.0

    def _end_bar(self) -> None:
        if self._bar is None:
            return
        if self._tqdm is not None:
            self._bar.close()
        else:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self._line_len = 0
        self._bar = None

    def _draw(self, force: bool = False) -> None:
        bar = self._bar
        now = time.monotonic()
        if not force and now - self._last_draw < 0.1:
            return
        self._last_draw = now
        done, total = bar["done"], bar["total"]
        byte = self.phase in _BYTE_PHASES
        fmt = _human_bytes if byte else (lambda v: str(int(v)))
        if total:
            frac = min(1.0, done / total)
            width = 24
            fill = int(frac * width)
            text = (f"{bar['label']}: [{'#' * fill}{'.' * (width - fill)}] "
                    f"{fmt(done)}/{fmt(total)} {100 * frac:3.0f}%")
        else:
            text = f"{bar['label']}: {fmt(done)}"
        if bar["extra"]:
            text += "  " + bar["extra"]
        pad = max(0, self._line_len - len(text))
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._line_len = len(text)

    # ---- reports -------------------------------------------------------------
    def update(self, phase: str, done: int, total: int, iteration: int = 0,
               fit: float = 0.0, delta: float = 0.0) -> None:
        if phase != self.phase or self._bar is None:
            self._start(phase, total)
        if phase == "iteration":
            done = iteration
            extra = f"fit {fit:.10f}  delta {delta:.3e}"
        else:
            extra = ""
        if self._tqdm is not None:
            bar = self._bar
            if total and bar.total != total and phase != "iteration":
                bar.total = total
            if done >= bar.n:
                bar.update(done - bar.n)
            if extra:
                bar.set_postfix_str(extra, refresh=False)
        else:
            bar = self._bar
            if total and phase != "iteration":
                bar["total"] = total
            bar["done"] = done
            bar["extra"] = extra
            self._draw()

    def close(self) -> None:
        self._end_bar()
        self.phase = None


def make_bar(progress: Optional[bool], iters_hint: Optional[int]) -> Optional[ProgressBar]:
    """A ProgressBar when progress is True, or when it is None and standard
    error is a terminal; else None."""
    if progress is False:
        return None
    if progress is None:
        try:
            if not sys.stderr.isatty():
                return None
        except (AttributeError, ValueError):
            return None
    return ProgressBar(iters_hint)
