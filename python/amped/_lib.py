"""ctypes declarations of libamped's public interface (lib/amped.h).

Every foreign call goes through :data:`lib`, a :class:`ctypes.CDLL`, which
releases the GIL for the duration of each call: a decomposition runs with
the GIL free, and other Python threads keep running beside it.

The library is found, in this order:

1. the path in the environment variable ``AMPED_LIB``;
2. the path recorded when the package was built (``_build_config.py``,
   written by ``setup.py`` from ``AMPED_LIB`` or ``pkg-config``);
3. the copy bundled in the package (``amped/_libs/libamped.so*``), which
   ``pip install ./python`` builds from the source tree when no installed
   library is found;
4. ``ctypes.util.find_library("amped")``: an installed libamped.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_int,
                    c_int64, c_uint, c_uint32, c_uint64, c_void_p)
from typing import List, Optional

__all__ = ["lib", "library_path", "AMPED_OK", "STATUS_NAMES", "Coo", "BuildOptions",
           "Progress", "RankSummary", "Device", "PROGRESS_FN", "INDEX_INT32", "INDEX_INT64",
           "INDEX_UINT32", "INDEX_UINT64", "NTIMES"]

# ---- constants (amped.h) -----------------------------------------------------
AMPED_OK = 0
#: amped_status numbers (stable) by name, without the AMPED_ERR_ prefix.
STATUS_NAMES = {
    0: "OK", 1: "USAGE", 2: "NOMEM", 3: "IO", 4: "PARSE", 5: "RANGE", 6: "FORMAT",
    7: "CORRUPT", 8: "CHECKSUM", 9: "VERSION", 10: "DUPLICATE", 11: "EMPTY", 12: "CUDA",
    13: "NO_DEVICE", 14: "UNSUPPORTED", 15: "INTERNAL", 16: "TRUNCATED", 17: "PEER",
}
INDEX_INT32, INDEX_INT64, INDEX_UINT32, INDEX_UINT64 = 0, 1, 2, 3
#: AMPED_NTIMES: the phases amped_result_times reports.
NTIMES = 11


# ---- structures ----------------------------------------------------------------
class Coo(Structure):
    """struct amped_coo."""
    _fields_ = [
        ("nmodes", c_uint),
        ("nnz", c_uint64),
        ("indices", c_void_p),
        ("index_type", c_int),
        ("nnz_stride", c_int64),
        ("mode_stride", c_int64),
        ("index_base", c_int),
        ("values", c_void_p),
        ("value_stride", c_int64),
        ("dims", c_void_p),
    ]


class BuildOptions(Structure):
    """struct amped_build_options."""
    _fields_ = [
        ("shards", c_uint32),
        ("level", c_int),
        ("duplicates", c_int),
        ("remap_streams", c_int),
        ("threads", c_int),
        ("source_name", c_char_p),
        ("source_size", c_uint64),
        ("source_hash", c_uint64),
    ]


class Progress(Structure):
    """struct amped_progress."""
    _fields_ = [
        ("phase", c_char_p),
        ("done", c_uint64),
        ("total", c_uint64),
        ("iter", c_uint),
        ("fit", c_double),
        ("delta", c_double),
        ("seconds", c_double),
        ("model", c_uint),
        ("rank", c_uint),
    ]


class RankSummary(Structure):
    """struct amped_rank_summary."""
    _fields_ = [
        ("rank", c_uint),
        ("best_model", c_uint),
        ("best_fit", c_double),
        ("worst_fit", c_double),
        ("fms_min", c_double),
        ("fms_median", c_double),
    ]


class Device(Structure):
    """struct amped_device."""
    _fields_ = [
        ("name", c_char * 256),
        ("ordinal", c_int),
        ("cc_major", c_int),
        ("cc_minor", c_int),
        ("sm_count", c_int),
        ("total_memory", c_uint64),
        ("free_memory", c_uint64),
    ]


#: amped_progress_fn: int (*)(void *ctx, const amped_progress *p).
PROGRESS_FN = CFUNCTYPE(c_int, c_void_p, POINTER(Progress))


# ---- finding the library ----------------------------------------------------------
def _candidates() -> List[str]:
    found: List[str] = []
    env = os.environ.get("AMPED_LIB")
    if env:
        return [env]          # asked for by name: that one or an error
    try:
        from . import _build_config  # type: ignore[attr-defined]
        path = getattr(_build_config, "LIBRARY", None)
        if path:
            found.append(path)
    except ImportError:
        pass
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_libs")
    # The soname's link first (libamped.so.0), then the unversioned name.
    bundled = sorted(glob.glob(os.path.join(here, "libamped.so.*")), key=len)
    bundled += glob.glob(os.path.join(here, "libamped.so"))
    bundled += glob.glob(os.path.join(here, "libamped*.dylib"))
    found.extend(bundled)
    name = ctypes.util.find_library("amped")
    if name:
        found.append(name)
    return found


def _wait_passively() -> None:
    """OpenMP's threads wait passively, as amped-run's do (issue 40).

    libgomp reads its wait policy once, as it is loaded (with libamped,
    unless something loaded it before), and by default spins: on a machine
    whose CPUs other work shares, a spinning thread takes the CPU from the
    one it waits for (bench/RESULTS.md, "Python over libamped"). A user's
    own OMP_WAIT_POLICY or GOMP_SPINCOUNT stays."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "passive"


def _load() -> "tuple[ctypes.CDLL, str]":
    _wait_passively()
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append(f"{path}: {e}")
    hint = ("set AMPED_LIB to the path of libamped.so, install libamped "
            "(make install, with amped.pc for pkg-config), or reinstall the package "
            "from the source tree (pip install ./python), which builds it")
    if errors:
        raise ImportError("amped: cannot load libamped: " + "; ".join(errors) + "; " + hint)
    raise ImportError("amped: libamped not found: " + hint)


lib, library_path = _load()


def _declare(name: str, restype, *argtypes) -> None:
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_T = c_void_p      # amped_tensor *
_O = c_void_p      # amped_options *
_R = c_void_p      # amped_result *

_declare("amped_version_number", c_uint)
_declare("amped_version_string", c_char_p)
_declare("amped_build_info", c_char_p)
_declare("amped_strerror", c_char_p, c_int)
_declare("amped_last_error", c_char_p)

_declare("amped_tensor_open", c_int, c_char_p, POINTER(_T))
_declare("amped_tensor_from_coo", c_int, POINTER(Coo), POINTER(BuildOptions), POINTER(_T))
_declare("amped_tensor_load", c_int, c_char_p, POINTER(BuildOptions), POINTER(_T))
_declare("amped_tensor_save", c_int, _T, c_char_p)
_declare("amped_tensor_free", None, _T)
_declare("amped_tensor_nmodes", c_uint, _T)
_declare("amped_tensor_nnz", c_uint64, _T)
_declare("amped_tensor_dims", None, _T, POINTER(c_uint64))
_declare("amped_tensor_norm_sq", c_double, _T)
_declare("amped_tensor_value_bytes", c_int, _T)

_declare("amped_options_new", c_int, POINTER(_O))
_declare("amped_options_free", None, _O)
_declare("amped_options_set", c_int, _O, c_char_p, c_char_p)

_declare("amped_cp", c_int, _T, _O, PROGRESS_FN, c_void_p, POINTER(_R))
_declare("amped_result_nmodes", c_uint, _R)
_declare("amped_result_rank", c_uint, _R)
_declare("amped_result_iters", c_uint, _R)
_declare("amped_result_fit", c_double, _R)
_declare("amped_result_converged", c_int, _R)
_declare("amped_result_stopped", c_int, _R)
_declare("amped_result_weights", None, _R, POINTER(c_double))
_declare("amped_result_factor", c_int, _R, c_uint, POINTER(c_double))
_declare("amped_result_fits", None, _R, POINTER(c_double))
_declare("amped_result_method", c_char_p, _R)
_declare("amped_result_series", c_int, _R, c_char_p, POINTER(c_double))
_declare("amped_result_completion", c_int, _R, POINTER(c_uint64), POINTER(c_uint64),
         POINTER(c_uint64), POINTER(c_uint64))
_declare("amped_result_times", None, _R, POINTER(c_double))
_declare("amped_time_name", c_char_p, c_int)
_declare("amped_result_backend", c_char_p, _R)
_declare("amped_result_device", c_char_p, _R)
_declare("amped_result_gpus", c_uint, _R)
_declare("amped_result_free", None, _R)

_W = c_void_p      # amped_sweep *
_declare("amped_cp_sweep", c_int, _T, _O, PROGRESS_FN, c_void_p, POINTER(_W))
_declare("amped_sweep_models", c_uint, _W)
_declare("amped_sweep_model", _R, _W, c_uint)
_declare("amped_sweep_seed", c_uint64, _W, c_uint)
_declare("amped_sweep_fms", c_double, _W, c_uint)
_declare("amped_sweep_ranks", c_uint, _W)
_declare("amped_sweep_rank", c_int, _W, c_uint, POINTER(RankSummary))
_declare("amped_sweep_chosen", c_uint, _W, POINTER(c_char_p))
_declare("amped_sweep_stopped", c_int, _W)
_declare("amped_sweep_seconds", c_double, _W)
_declare("amped_sweep_free", None, _W)

_declare("amped_device_count", c_int)
_declare("amped_device_get", c_int, c_int, POINTER(Device))
_declare("amped_set_threads", None, c_int)


def last_error() -> str:
    """amped_last_error() of this thread, decoded."""
    msg = lib.amped_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def strerror(status: int) -> str:
    msg = lib.amped_strerror(status)
    return msg.decode("utf-8", "replace") if msg else ""


def optional_str(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""
