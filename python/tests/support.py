"""Shared helpers of the amped Python tests.

The environment (tests/python.sh sets it; by hand, set it yourself):
  AMPED_LIB             the libamped.so to test, with the package of this
                        source tree (python/amped); without it, the amped
                        that is installed, with its own library
  AMPED_TEST_BUILDDIR   the build tree holding amped-prep and amped-run
                        (their tests are skipped without it, or fail under CI)
  AMP_TEST_DATA         ../shared/data, the real tensors
  CI=true               a missing requirement fails instead of skipping
"""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from typing import Dict, List, Optional, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# With AMPED_LIB (tests/python.sh, a build tree) the package of this source
# tree, python/amped; else the amped that is installed (pip install ./python).
if os.environ.get("AMPED_LIB"):
    sys.path.insert(0, os.path.dirname(HERE))

import amped  # noqa: E402

#: The folder holding the amped package under test: PYTHONPATH for children.
AMPED_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(amped.__file__)))


def child_env() -> dict:
    """The environment of a child python that imports the same amped."""
    env = dict(os.environ)
    env["PYTHONPATH"] = AMPED_PARENT + os.pathsep + env.get("PYTHONPATH", "")
    return env

CI = os.environ.get("CI") == "true"
BUILDDIR = os.environ.get("AMPED_TEST_BUILDDIR", "")
DATA = os.environ.get("AMP_TEST_DATA") or os.path.join(HERE, "..", "..", "..", "shared", "data")
SRCDIR = os.path.dirname(os.path.dirname(HERE))


def need(ok: bool, reason: str) -> None:
    """Skip the test with reason unless ok; under CI=true, fail instead."""
    if ok:
        return
    if CI:
        raise AssertionError(f"{reason} (CI=true needs it)")
    raise unittest.SkipTest(reason)


def need_module(name: str) -> object:
    try:
        return __import__(name)
    except Exception as e:          # ImportError, or a broken install
        need(False, f"no {name} in {sys.executable} ({e.__class__.__name__}: {e})")


def program(name: str) -> str:
    path = os.path.join(BUILDDIR, name) if BUILDDIR else ""
    need(bool(path) and os.access(path, os.X_OK),
         f"no {name} (AMPED_TEST_BUILDDIR={BUILDDIR!r} names the build tree)")
    return path


def data_file(name: str) -> str:
    path = os.path.join(DATA, name)
    need(os.path.isfile(path), f"no {name} in AMP_TEST_DATA={DATA}")
    return path


def run(cmd: List[str], ok: bool = True, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if ok and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: exit status {p.returncode}\n"
                             f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}")
    return p


class TempDirCase(unittest.TestCase):
    """A test case with a fresh temporary folder, self.tmp."""

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="amped-pytest-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def path(self, name: str) -> str:
        return os.path.join(self.tmp, name)


def read_tns(path: str) -> Tuple[np.ndarray, np.ndarray]:
    """A .tns read by NumPy alone: (indices nnz x N int64, as in the file;
    values float64)."""
    a = np.loadtxt(path, dtype=np.float64, ndmin=2, comments="#")
    idx = a[:, :-1].astype(np.int64)
    assert np.array_equal(idx, a[:, :-1]), "non-integer index"
    return idx, np.ascontiguousarray(a[:, -1])


def summed(idx: np.ndarray, vals: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Repeated coordinates summed (nnz x N in, N x nnz out)."""
    u, inv = np.unique(idx, axis=0, return_inverse=True)
    v = np.bincount(inv.ravel(), weights=vals, minlength=u.shape[0])
    return u.T.copy(), v


def fit_of(coords: np.ndarray, vals: np.ndarray, lam: np.ndarray, A: List[np.ndarray]) -> float:
    """1 - |X - M| / |X| by |X|^2 - 2 <X, M> + |M|^2, with
    |M|^2 = lambda' (Hadamard product of the Grams) lambda. coords N x nnz,
    0-based, repeated coordinates already summed."""
    R = lam.shape[0]
    prod = np.ones((vals.shape[0], R))
    G = np.ones((R, R))
    for m, Am in enumerate(A):
        Am = np.asarray(Am, dtype=np.float64)
        prod *= Am[coords[m], :]
        G *= Am.T @ Am
    inner = float(vals @ (prod @ lam))
    xx = float(vals @ vals)
    mm = float(lam @ G @ lam)
    return 1 - math.sqrt(max(xx - 2 * inner + mm, 0.0)) / math.sqrt(xx)


_xxh = None


def xxh3_64(path: str) -> Optional[int]:
    """The XXH3-64 of a file (what `xxhsum -H3` prints), by libxxhash
    through ctypes; None where there is no libxxhash."""
    global _xxh
    if _xxh is None:
        name = ctypes.util.find_library("xxhash")
        if not name:
            return None
        try:
            lib = ctypes.CDLL(name)
            f = lib.XXH3_64bits
        except (OSError, AttributeError):
            return None
        f.restype = ctypes.c_uint64
        f.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        _xxh = f
    with open(path, "rb") as fh:
        data = fh.read()
    return int(_xxh(data, len(data)))


def info_source_hash(amp: str) -> Optional[int]:
    """The source XXH3 that `amped-run --info` prints for an .amp file."""
    p = run([program("amped-run"), "--info", amp])
    m = re.search(r"^source:.*XXH3 ([0-9a-f]{16})", p.stdout, re.M)
    return int(m.group(1), 16) if m else None


def prep(tns: str, amp: str, *args: str) -> None:
    run([program("amped-prep"), "-q", "-f", *args, "-o", amp, tns])


def amped_run(amp: str, prefix: str, *args: str) -> Dict:
    """amped-run with npy factors and a JSON report; the report."""
    js = prefix + ".json"
    run([program("amped-run"), "-q", amp, "-o", prefix, "--format", "npy",
         "--json", js, *args])
    with open(js) as f:
        return json.load(f)


def run_factors(prefix: str, nmodes: int) -> Tuple[np.ndarray, List[np.ndarray]]:
    lam = np.load(prefix + ".lambda.npy")
    A = [np.load(f"{prefix}.mode{m + 1}.npy") for m in range(nmodes)]
    return lam, A


def max_rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b) / (1 + np.abs(b))))
