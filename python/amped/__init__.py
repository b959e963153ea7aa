"""amped: CP decomposition of sparse tensors on the CPU and on GPUs.

A thin layer over libamped (lib/amped.h), the library that ``amped-prep``
and ``amped-run`` are built on: the same code, the same results to the
bit. NumPy arrays go in without copies where their layout allows, the
factor matrices come back as NumPy arrays the C side writes into, and the
GIL is released for the whole decomposition.

    >>> import numpy as np, amped
    >>> idx = np.array([[0, 0, 0], [1, 2, 3], [2, 1, 0], [1, 1, 1]])
    >>> t = amped.Tensor.from_coo(idx, np.array([1.0, 2.0, 3.0, 4.0]))
    >>> t.shape, t.nnz
    ((3, 3, 4), 4)
    >>> res = amped.cp(t, rank=2, gpus=0, seed=7, progress=False)
    >>> [f.shape for f in res.factors]
    [(3, 2), (3, 2), (4, 2)]

Errors from the library raise subclasses of :class:`amped.Error` carrying
its message; bad arguments raise ``ValueError`` (:class:`amped.UsageError`)
or ``TypeError`` before any work is done.
"""
from __future__ import annotations

import math
import numbers
import os
import shutil
import signal
import tempfile
import threading
from ctypes import POINTER, byref, c_char_p, c_double, c_uint64, c_void_p
from dataclasses import dataclass
from typing import (Any, Callable, Dict, List, Optional, Sequence, Tuple, Union)

import numpy as np

from . import _lib
from ._errors import (ChecksumError, CorruptError, CudaError, DuplicateError,
                      EmptyTensorError, Error, FileError, FormatError, InternalError,
                      NoDeviceError, OutOfMemoryError, ParseError, PeerError, RangeError,
                      TruncatedError, UnsupportedError, UsageError, VersionError, check, error_for)
from ._progress import make_bar

__all__ = [
    "Tensor", "CPResult", "ProgressInfo", "DeviceInfo", "SweepResult", "RankSummary", "cp",
    "sweep", "load", "devices", "version",
    "build_info", "library_path",
    "Error", "UsageError", "OutOfMemoryError", "FileError", "ParseError", "RangeError",
    "FormatError", "CorruptError", "ChecksumError", "VersionError", "TruncatedError",
    "DuplicateError", "EmptyTensorError", "CudaError", "NoDeviceError", "UnsupportedError",
    "InternalError", "PeerError",
]

PathLike = Union[str, "os.PathLike[str]"]
#: The library this process loaded (a path, or the name the loader resolved).
library_path: str = _lib.library_path

_lib_ = _lib.lib
_MAX_MODES = 32
_MAX_RANK = 4096
_METHODS = ("als", "ao-admm", "mu", "hals", "cp-apr", "gcp")
_CONSTRAINTS = ("none", "nonneg")
_MEMORIES = ("auto", "resident", "remap", "stream", "compressed")
_PRECISIONS = {"f64": "f64", "float64": "f64", "double": "f64",
               "f32": "f32", "float32": "f32", "single": "f32"}
_INDEX_TYPES = {("i", 4): _lib.INDEX_INT32, ("i", 8): _lib.INDEX_INT64,
                ("u", 4): _lib.INDEX_UINT32, ("u", 8): _lib.INDEX_UINT64}


# ---- small helpers ---------------------------------------------------------------
def _fsencode(path: PathLike, what: str) -> bytes:
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{what} must be a path (str or os.PathLike), not {type(path).__name__}")
    b = os.fsencode(path)
    if not b:
        raise UsageError(f"{what} is empty")
    if b"\0" in b:
        raise UsageError(f"{what} contains a NUL byte")
    return b


def _as_int(value: Any, what: str) -> int:
    """value as a Python int: ints and NumPy integers, never bool or float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}")
    return int(value)


def _as_real(value: Any, what: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a real number, not {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise UsageError(f"{what} must be finite, not {v}")
    return v


def _option_text(value: Any) -> str:
    """An option's value as amped-run's command line spells it."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("a flag option takes True (set) or False/None (unset)")
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))         # repr round-trips the double exactly
    if isinstance(value, (list, tuple, np.ndarray)):
        return ",".join(_option_text(v) for v in value)
    raise TypeError(f"cannot pass a {type(value).__name__} as an option value")


def _per_mode(value: Any, what: str, ndim: int, conv: Callable[[Any], Any]) -> List[Any]:
    """One value or one per mode, each checked by conv."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        return [conv(value)]
    items = list(value)
    if len(items) not in (1, ndim):
        raise UsageError(f"{what}: {len(items)} values for a tensor of {ndim} modes "
                         f"(give one, or one per mode)")
    return [conv(v) for v in items]


# ---- tensors ---------------------------------------------------------------------
class Tensor:
    """A sparse tensor held by libamped, ready to decompose.

    Make one with :meth:`from_coo` (NumPy coordinate arrays),
    :meth:`from_sparse` (pydata ``sparse.COO``, a pyttb ``sptensor``, a
    SciPy sparse matrix) or :func:`amped.load` (a ``.tns``, ``.tns.gz``,
    ``.tns.zst``, ``.bin`` or ``.amp`` file). A tensor built in memory has
    gone through amped-prep's checks and layout (indices within the
    dimensions, repeated coordinates summed, the mode copies built), and
    :meth:`save` writes it as the ``.amp`` file amped-prep would.

    The handle is freed when the object is collected, or at once by
    :meth:`close` or a ``with`` block.
    """

    __slots__ = ("_handle", "_lock", "__weakref__")

    def __init__(self, _handle: int) -> None:
        if not isinstance(_handle, int) or not _handle:
            raise TypeError("amped.Tensor is made by Tensor.from_coo, Tensor.from_sparse "
                            "or amped.load")
        self._handle: Optional[int] = _handle
        # libamped: one call at a time per handle.
        self._lock = threading.Lock()

    # ---- construction ----------------------------------------------------------
    @classmethod
    def from_coo(cls, indices: Any, values: Any, shape: Optional[Sequence[int]] = None,
                 index_base: int = 0, *, duplicates: str = "sum",
                 source: Optional[Union[str, Tuple[str, int, int]]] = None,
                 shards: Optional[int] = None, level: Optional[int] = None,
                 remap_streams: bool = False, threads: Optional[int] = None) -> "Tensor":
        """A tensor from coordinate arrays.

        Args:
            indices: integer array, nnz x N (a row per nonzero, as in a
                ``.tns``) or N x nnz (a row per mode, as ``sparse.COO.coords``).
                int32, int64, uint32 and uint64 arrays are read where they lie,
                any strides, without a copy; other integer types are
                converted. When both readings fit (nnz == N), nnz x N.
            values: the nnz values, converted to float64 only if they are
                not float64 already.
            shape: the dimensions, one per mode; default each mode's largest
                index + 1 - index_base.
            index_base: 0 or 1, the smallest index.
            duplicates: "sum" (repeated coordinates summed, as amped-prep
                does) or "error" (refused: :class:`DuplicateError`).
            source: provenance recorded in a saved ``.amp`` file, as
                amped-prep records its input: a name, or (name, size in
                bytes, XXH3-64 of the file, as ``xxhsum -H3`` prints it).
            shards, level, remap_streams: the ``.amp`` layout, as
                amped-prep's ``--shards``, ``--level`` (Zstandard level,
                0 stores) and ``--remap-streams``; defaults amped-prep's.
            threads: CPU threads for the build (default every CPU).

        Raises:
            TypeError: arrays of the wrong kind (float indices, complex values).
            UsageError: wrong shapes, a bad shape or base, no nonzeros
                (:class:`EmptyTensorError`); from the library,
                :class:`RangeError` for an index outside its dimension or
                base and :class:`UsageError` for a value that is not finite.

        Example:
            >>> import numpy as np, amped
            >>> idx = np.array([[1, 1], [2, 3]], dtype=np.int32)   # 1-based, nnz x N
            >>> t = amped.Tensor.from_coo(idx, [0.5, 2.0], shape=(2, 3), index_base=1)
            >>> t.shape, t.nnz, round(t.norm ** 2, 6)
            ((2, 3), 2, 4.25)
        """
        # ---- values ----
        vals = np.asarray(values)
        if vals.dtype.kind not in "fiu" or vals.dtype.kind == "b":
            raise TypeError(f"values must be real numbers, not {vals.dtype}")
        if vals.ndim == 2 and 1 in vals.shape:
            vals = vals[:, 0] if vals.shape[1] == 1 else vals[0, :]   # pyttb's (nnz, 1)
        if vals.ndim != 1:
            raise UsageError(f"values must be 1-D (nnz,), not of shape {vals.shape}")
        nnz = vals.shape[0]
        if vals.dtype != np.float64 or not vals.dtype.isnative:
            vals = vals.astype(np.float64)
        vstride = vals.strides[0] if nnz > 1 else 8
        # 0 means 1 to libamped, and its strides count elements.
        if vstride <= 0 or vstride % 8:
            vals = np.ascontiguousarray(vals)
            vstride = 8

        # ---- indices ----
        idx = np.asarray(indices)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, not {idx.dtype}")
        if idx.ndim != 2:
            raise UsageError(f"indices must be 2-D (nnz x N or N x nnz), not of shape "
                             f"{idx.shape}")
        if nnz == 0 or 0 in idx.shape:
            raise EmptyTensorError("the tensor has no nonzeros", 11)
        dims: Optional[List[int]] = None
        if shape is not None:
            if isinstance(shape, (str, bytes)) or not isinstance(shape, (Sequence, np.ndarray)):
                raise TypeError(f"shape must be a sequence of integers, not "
                                f"{type(shape).__name__}")
            dims = [_as_int(d, "shape") for d in shape]
            if any(d < 1 for d in dims):
                raise UsageError(f"shape {tuple(dims)}: every dimension must be 1 or more")
        n_rows, n_cols = idx.shape
        if dims is not None:
            nmodes = len(dims)
            if n_rows == nnz and n_cols == nmodes:
                by_nnz = True
            elif n_rows == nmodes and n_cols == nnz:
                by_nnz = False
            else:
                raise UsageError(f"indices of shape {idx.shape} do not match {nnz} values "
                                 f"in {nmodes} modes (need ({nnz}, {nmodes}) or "
                                 f"({nmodes}, {nnz}))")
        elif n_rows == nnz:
            by_nnz, nmodes = True, n_cols
        elif n_cols == nnz:
            by_nnz, nmodes = False, n_rows
        else:
            raise UsageError(f"indices of shape {idx.shape} do not match {nnz} values "
                             f"(need nnz x N or N x nnz)")
        if not 1 <= nmodes <= _MAX_MODES:
            raise UsageError(f"{nmodes} modes: amped takes 1 to {_MAX_MODES}")
        if isinstance(index_base, (bool, np.bool_)) or index_base not in (0, 1):
            raise UsageError(f"index_base must be 0 or 1, not {index_base!r}")

        key = (idx.dtype.kind, idx.dtype.itemsize)
        if key not in _INDEX_TYPES:
            # int8/int16/uint8/uint16: widened, sign kept.
            idx = idx.astype(np.int64 if idx.dtype.kind == "i" else np.uint64)
        elif not idx.dtype.isnative:
            idx = idx.astype(idx.dtype.newbyteorder("="))
        item = idx.dtype.itemsize
        s0, s1 = idx.strides
        if s0 < 0 or s1 < 0 or s0 % item or s1 % item:
            idx = np.ascontiguousarray(idx)
            s0, s1 = idx.strides
        itype = _INDEX_TYPES[(idx.dtype.kind, idx.dtype.itemsize)]
        nnz_stride, mode_stride = (s0 // item, s1 // item) if by_nnz else (s1 // item, s0 // item)

        coo = _lib.Coo()
        coo.nmodes = nmodes
        coo.nnz = nnz
        coo.indices = idx.ctypes.data
        coo.index_type = itype
        coo.nnz_stride = nnz_stride
        coo.mode_stride = mode_stride
        coo.index_base = int(index_base)
        coo.values = vals.ctypes.data
        coo.value_stride = vstride // 8
        dims_arr = None
        if dims is not None:
            dims_arr = np.array(dims, dtype=np.uint64)
            coo.dims = dims_arr.ctypes.data
        opts = _build_options(duplicates, source, shards, level, remap_streams, threads)
        handle = c_void_p()
        status = _lib_.amped_tensor_from_coo(byref(coo), opts, byref(handle))
        # The arrays live until here: the library reads them only during the call.
        del idx, vals, dims_arr
        check(status)
        return cls(handle.value)

    @classmethod
    def from_sparse(cls, x: Any, **kwargs: Any) -> "Tensor":
        """A tensor from another library's sparse tensor, without importing it:

        - pydata ``sparse.COO`` (``coords``, N x nnz; its fill value must be 0);
        - pyttb ``sptensor`` (``subs``, nnz x N, and ``vals``);
        - a SciPy sparse matrix or array (2 modes, through ``tocoo()``).

        The shape is the object's; keyword arguments go to :meth:`from_coo`.

        Example:
            >>> import sparse, amped                       # doctest: +SKIP
            >>> x = sparse.random((30, 40, 50), density=0.01, random_state=0)  # doctest: +SKIP
            >>> amped.Tensor.from_sparse(x).nnz            # doctest: +SKIP
            600
        """
        if isinstance(x, Tensor):
            return x
        shape = tuple(int(d) for d in getattr(x, "shape", ()))
        if hasattr(x, "coords") and hasattr(x, "data"):             # sparse.COO
            fill = getattr(x, "fill_value", 0)
            if fill is not None and np.any(fill != 0):
                raise UsageError(f"a sparse.COO with fill value {fill} is not sparse in "
                                 f"amped's sense (the fill value must be 0)")
            return cls.from_coo(x.coords, x.data, shape=shape, **kwargs)
        if hasattr(x, "subs") and hasattr(x, "vals"):               # pyttb.sptensor
            subs = np.asarray(x.subs)
            if subs.size == 0:
                raise EmptyTensorError("the sptensor has no nonzeros", 11)
            return cls.from_coo(subs, np.asarray(x.vals), shape=shape, **kwargs)
        if hasattr(x, "tocoo") and len(shape) == 2:                  # scipy.sparse
            c = x.tocoo()
            idx = np.vstack([np.asarray(c.row), np.asarray(c.col)])
            return cls.from_coo(idx, np.asarray(c.data), shape=shape, **kwargs)
        raise TypeError(f"cannot read a {type(x).__module__}.{type(x).__name__} as a sparse "
                        f"tensor (amped reads sparse.COO, pyttb.sptensor and scipy.sparse)")

    # ---- the handle ------------------------------------------------------------------
    def _h(self) -> int:
        if self._handle is None:
            raise ValueError("the amped.Tensor is closed")
        return self._handle

    def close(self) -> None:
        """Free the library's tensor now (else when the object is collected)."""
        h, self._handle = getattr(self, "_handle", None), None
        if h:
            _lib_.amped_tensor_free(h)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "Tensor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- description ---------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """The number of modes."""
        return int(_lib_.amped_tensor_nmodes(self._h()))

    @property
    def shape(self) -> Tuple[int, ...]:
        """The dimensions (the original index space)."""
        h = self._h()
        n = _lib_.amped_tensor_nmodes(h)
        dims = (c_uint64 * n)()
        _lib_.amped_tensor_dims(h, dims)
        return tuple(int(d) for d in dims)

    @property
    def nnz(self) -> int:
        """The number of nonzeros, repeated coordinates summed."""
        return int(_lib_.amped_tensor_nnz(self._h()))

    @property
    def norm(self) -> float:
        """The Frobenius norm |X|."""
        return math.sqrt(_lib_.amped_tensor_norm_sq(self._h()))

    @property
    def dtype(self) -> np.dtype:
        """The values' type as held: float32 or float64 (amped-prep's
        ``--values=auto`` stores f32 where every value is exactly one)."""
        return np.dtype(np.float32 if _lib_.amped_tensor_value_bytes(self._h()) == 4
                        else np.float64)

    def __repr__(self) -> str:
        if self._handle is None:
            return "<amped.Tensor (closed)>"
        return (f"<amped.Tensor shape={self.shape} nnz={self.nnz} "
                f"values={self.dtype.name}>")

    # ---- output --------------------------------------------------------------------
    def save(self, path: PathLike) -> None:
        """Write the tensor as an ``.amp`` file, the bytes amped-prep writes
        for the same nonzeros, options and provenance. The file appears
        complete or not at all.

        Raises:
            FileError: the directory is missing or not writable.
        """
        p = _fsencode(path, "path")
        with self._lock:
            check(_lib_.amped_tensor_save(self._h(), p))


def _build_options(duplicates: str, source: Any, shards: Optional[int],
                   level: Optional[int], remap_streams: bool,
                   threads: Optional[int]) -> Any:
    """An amped_build_options pointer, or None for every default."""
    if duplicates not in ("sum", "error"):
        raise UsageError(f"duplicates must be 'sum' or 'error', not {duplicates!r}")
    name, size, xxh = None, 0, 0
    if source is not None:
        if isinstance(source, (str, os.PathLike)):
            name = os.fspath(source)
        elif isinstance(source, (tuple, list)) and len(source) == 3:
            name = os.fspath(source[0])
            size = _as_int(source[1], "source size")
            xxh = _as_int(source[2], "source hash")
            if not (0 <= size < 2 ** 64 and 0 <= xxh < 2 ** 64):
                raise UsageError("source size and hash must be 0 to 2**64 - 1")
        else:
            raise TypeError("source must be a name or (name, size, xxh3_64)")
        if "\0" in name:
            raise UsageError("source name contains a NUL character")
    if shards is not None:
        shards = _as_int(shards, "shards")
        if not 1 <= shards < 2 ** 32:
            raise UsageError(f"shards must be 1 or more, not {shards}")
    if level is not None:
        level = _as_int(level, "level")
        if not -7 <= level <= 22:
            raise UsageError(f"level must be -7 to 22, not {level}")
    if threads is not None:
        threads = _as_int(threads, "threads")
        if threads < 1:
            raise UsageError(f"threads must be 1 or more, not {threads}")
    if (duplicates == "sum" and source is None and shards is None and level is None
            and not remap_streams and threads is None):
        return None
    o = _lib.BuildOptions()
    o.shards = shards or 0
    o.level = 1 if level is None else level          # amped-prep's default; 0 stores
    o.duplicates = 1 if duplicates == "error" else 0
    o.remap_streams = 1 if remap_streams else 0
    o.threads = threads or 0
    o.source_name = name.encode("utf-8", "surrogateescape") if name else None
    o.source_size = size
    o.source_hash = xxh
    return byref(o)


def load(path: PathLike, **kwargs: Any) -> Tensor:
    """Read a tensor file: ``.tns`` (plain, ``.gz`` or ``.zst``) or FROSTT
    ``.bin`` as amped-prep reads it, or an ``.amp`` file (recognised by its
    first bytes, whatever its name). Keyword arguments (``duplicates``,
    ``shards``, ``level``, ``remap_streams``, ``threads``) are
    :meth:`Tensor.from_coo`'s; the provenance is the file's own.

    Raises:
        FileError: the file cannot be opened or read.
        ParseError, RangeError, FormatError (and its subclasses): its contents,
            with the file and line or section the library names.

    Example:
        >>> t = amped.load("data/sample.tns.zst")     # doctest: +SKIP
        >>> t.save("sample.amp")                      # doctest: +SKIP
    """
    p = _fsencode(path, "path")
    if "source" in kwargs:
        raise TypeError("load() records the file's own provenance (no source=)")
    opts = _build_options(kwargs.pop("duplicates", "sum"), None, kwargs.pop("shards", None),
                          kwargs.pop("level", None), kwargs.pop("remap_streams", False),
                          kwargs.pop("threads", None))
    if kwargs:
        raise TypeError(f"load() got unexpected keyword arguments {sorted(kwargs)}")
    handle = c_void_p()
    check(_lib_.amped_tensor_load(p, opts, byref(handle)))
    return Tensor(handle.value)


# ---- the decomposition -------------------------------------------------------------
@dataclass(frozen=True)
class ProgressInfo:
    """What the run reports as it goes, given to cp's and sweep's callback.

    phase is "loading", "splitting", "uploading", "NCCL init" or "iteration";
    done and total its progress (total 0: unknown; bytes for loading and
    uploading); at an iteration, iteration (from 1), fit, delta (the change
    of fit) and seconds (its wall time). fit is the method's objective: the
    log-likelihood for cp-apr, the loss estimate for gcp, the fit to the
    training entries for observed="nonzeros". In :func:`sweep`, model is
    the index of the model whose iteration it is, rank its rank."""
    phase: str
    done: int
    total: int
    iteration: int
    fit: float
    delta: float
    seconds: float
    model: int = 0
    rank: int = 0


@dataclass
class CPResult:
    """A CP model, lambda and factors, and how the run went.

    The model's entry at (i1, ..., iN) is
    ``sum_r weights[r] * factors[0][i1, r] * ... * factors[N-1][iN, r]``;
    each factor is (dims[m], rank) float64, rows of indices that never
    occur zero, its columns scaled as amped-run writes them (their scale in
    weights: 2-norm after the first iteration, then the largest magnitude
    where above 1). The arrays are NumPy's own, written by the library in
    place.

    Every per-iteration history is a float64 array of ``iters`` values
    (amped-run's ``--json`` "iterations"), None where the method has no
    such quantity:

    - every run: ``fits`` (the method's objective: for cp-apr the
      log-likelihood, for gcp the loss estimate), ``deltas``,
      ``iter_seconds``;
    - ``method="cp-apr"``: ``loglik``, ``kkt`` (the KKT violation),
      ``inner_iters`` (inner iterations taken);
    - ``observed="nonzeros"``: ``rmse_train``, ``rmse_test`` (NaN without
      test entries), and ``n_train``, ``n_test``, ``unobserved_rows`` and
      ``singular_rows`` (per mode, rows that kept their starting value);
    - ``method="gcp"``: ``loss`` (the estimate), ``loss_stderr``,
      ``loss_exact`` (NaN where not computed), ``rates``, ``failed``.

    A model of :func:`sweep` also has its ``seed`` and ``fms`` (factor
    match score against its rank's best start).
    """
    weights: np.ndarray
    factors: List[np.ndarray]
    fits: np.ndarray
    times: Dict[str, float]
    iters: int
    fit: float
    converged: bool
    stopped: bool
    backend: str
    device: str
    gpus: int
    method: str = "als"
    deltas: Optional[np.ndarray] = None
    iter_seconds: Optional[np.ndarray] = None
    loglik: Optional[np.ndarray] = None
    kkt: Optional[np.ndarray] = None
    inner_iters: Optional[np.ndarray] = None
    rmse_train: Optional[np.ndarray] = None
    rmse_test: Optional[np.ndarray] = None
    n_train: Optional[int] = None
    n_test: Optional[int] = None
    unobserved_rows: Optional[Tuple[int, ...]] = None
    singular_rows: Optional[Tuple[int, ...]] = None
    loss: Optional[np.ndarray] = None
    loss_stderr: Optional[np.ndarray] = None
    loss_exact: Optional[np.ndarray] = None
    rates: Optional[np.ndarray] = None
    failed: Optional[np.ndarray] = None
    seed: Optional[int] = None
    fms: Optional[float] = None

    @property
    def rank(self) -> int:
        return int(self.weights.shape[0])

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(int(f.shape[0]) for f in self.factors)

    def to_tensorly(self) -> Any:
        """The model as a TensorLy ``CPTensor`` (imports tensorly now)."""
        from tensorly.cp_tensor import CPTensor
        return CPTensor((self.weights, list(self.factors)))

    def to_pyttb(self) -> Any:
        """The model as a pyttb ``ktensor`` (imports pyttb now)."""
        import pyttb
        return pyttb.ktensor(list(self.factors), self.weights)

    def __repr__(self) -> str:
        state = ("stopped" if self.stopped else "converged" if self.converged
                 else "iteration limit")
        return (f"<amped.CPResult method={self.method} rank={self.rank} shape={self.shape} "
                f"fit={self.fit:.10f} iters={self.iters} ({state}) backend={self.backend}"
                f"{' ' + repr(self.device) if self.device else ''}>")


#: The series of amped_result_series each method has, by the attribute
#: that holds it (and its dtype).
_SERIES = {
    "all": (("deltas", "delta", np.float64), ("iter_seconds", "seconds", np.float64)),
    "cp-apr": (("loglik", "loglik", np.float64), ("kkt", "kkt", np.float64),
               ("inner_iters", "inner", np.int64)),
    "completion": (("rmse_train", "rmse_train", np.float64),
                   ("rmse_test", "rmse_test", np.float64)),
    "gcp": (("loss", "loss", np.float64), ("loss_stderr", "loss_stderr", np.float64),
            ("loss_exact", "loss_exact", np.float64), ("rates", "rate", np.float64),
            ("failed", "failed", np.bool_)),
}


def _series(r: int, name: str, iters: int, dtype: Any) -> np.ndarray:
    out = np.empty(iters, dtype=np.float64)
    check(_lib_.amped_result_series(r, name.encode(), out.ctypes.data_as(POINTER(c_double))))
    return out if dtype is np.float64 else out.astype(dtype)


def _result(r: int, shape: Tuple[int, ...]) -> CPResult:
    """Everything of an amped_result, read into NumPy arrays it owns."""
    n = _lib_.amped_result_nmodes(r)
    rank = _lib_.amped_result_rank(r)
    weights = np.empty(rank, dtype=np.float64)
    _lib_.amped_result_weights(r, weights.ctypes.data_as(POINTER(c_double)))
    factors = []
    for m in range(n):
        a = np.empty((shape[m], rank), dtype=np.float64)
        check(_lib_.amped_result_factor(r, m, a.ctypes.data_as(POINTER(c_double))))
        factors.append(a)
    iters = int(_lib_.amped_result_iters(r))
    fits = np.empty(iters, dtype=np.float64)
    if iters:
        _lib_.amped_result_fits(r, fits.ctypes.data_as(POINTER(c_double)))
    secs = (c_double * _lib.NTIMES)()
    _lib_.amped_result_times(r, secs)
    times = {_lib.optional_str(_lib_.amped_time_name(i)): float(secs[i])
             for i in range(_lib.NTIMES)}
    method = _lib.optional_str(_lib_.amped_result_method(r))
    extra: Dict[str, Any] = {}
    kinds = ["all", method]
    completion = _lib_.amped_result_completion(r, None, None, None, None) == _lib.AMPED_OK
    if completion:
        kinds.append("completion")
        n_train, n_test = c_uint64(), c_uint64()
        unobs, sing = (c_uint64 * n)(), (c_uint64 * n)()
        check(_lib_.amped_result_completion(r, byref(n_train), byref(n_test), unobs, sing))
        extra.update(n_train=int(n_train.value), n_test=int(n_test.value),
                     unobserved_rows=tuple(int(x) for x in unobs),
                     singular_rows=tuple(int(x) for x in sing))
    for kind in kinds:
        for attr, name, dtype in _SERIES.get(kind, ()):
            extra[attr] = _series(r, name, iters, dtype)
    return CPResult(weights=weights, factors=factors, fits=fits, times=times, iters=iters,
                    fit=float(_lib_.amped_result_fit(r)),
                    converged=bool(_lib_.amped_result_converged(r)),
                    stopped=bool(_lib_.amped_result_stopped(r)),
                    backend=_lib.optional_str(_lib_.amped_result_backend(r)),
                    device=_lib.optional_str(_lib_.amped_result_device(r)),
                    gpus=int(_lib_.amped_result_gpus(r)), method=method, **extra)


def _init_prefix(init: Any, shape: Tuple[int, ...], rank: int,
                 tmpdirs: List[str]) -> str:
    """init as a prefix amped_options_set("init") takes: a path prefix as
    is; a CPResult, (weights, factors) or a list of factors written as
    .npy files in a temporary folder."""
    if isinstance(init, (str, os.PathLike)):
        return os.fspath(init)
    weights = None
    if isinstance(init, CPResult):
        weights, factors = init.weights, init.factors
    elif (isinstance(init, tuple) and len(init) == 2
          and not isinstance(init[1], np.ndarray) and isinstance(init[1], (list, tuple))):
        weights, factors = init
    elif isinstance(init, (list, tuple)):
        factors = init
    else:
        raise TypeError("init must be a path prefix, a CPResult, (weights, factors) or a "
                        "list of factors")
    if len(factors) != len(shape):
        raise UsageError(f"init: {len(factors)} factors for a tensor of {len(shape)} modes")
    mats = []
    for m, f in enumerate(factors):
        a = np.asarray(f)
        if a.dtype.kind not in "fiu":
            raise TypeError(f"init: factor {m} must be real numbers, not {a.dtype}")
        if a.shape != (shape[m], rank):
            raise UsageError(f"init: factor {m} has shape {a.shape}, needs "
                             f"({shape[m]}, {rank})")
        mats.append(np.ascontiguousarray(a, dtype="<f8"))
    d = tempfile.mkdtemp(prefix="amped-init-")
    tmpdirs.append(d)
    prefix = os.path.join(d, "init")
    for m, a in enumerate(mats):
        np.save(f"{prefix}.mode{m + 1}.npy", a)
    if weights is not None:
        w = np.ascontiguousarray(np.asarray(weights), dtype="<f8")
        if w.shape != (rank,):
            raise UsageError(f"init: weights of shape {w.shape}, needs ({rank},)")
        np.save(f"{prefix}.lambda.npy", w)
    return prefix


def _run_options(ndim: int, method: Any, constraint: Any, l1: Any, l2: Any, gpus: Any,
                 memory: Any, precision: Any, iters: Any, tol: Any, seed: Any, threads: Any,
                 callback: Any, progress: Any, loss: Any, observed: Any, holdout: Any,
                 more: Dict[str, Any]) -> List[Tuple[str, Optional[str]]]:
    """cp's and sweep's keywords as amped_options_set's (name, value) pairs,
    each checked before any work; the library checks the values it alone
    knows (a loss's name, an observed's) and how options go together."""
    opts: List[Tuple[str, Optional[str]]] = []
    if not isinstance(method, str):
        raise TypeError(f"method must be a string, not {type(method).__name__}")
    m = method.lower().replace("_", "-")
    if m not in _METHODS:
        raise UsageError(f"method {method!r}: one of {', '.join(_METHODS)}")
    opts.append(("method", m))
    if constraint is not None:
        def conv_c(c: Any) -> str:
            if not isinstance(c, str):
                raise TypeError(f"constraint must be 'none' or 'nonneg', not "
                                f"{type(c).__name__}")
            if c not in _CONSTRAINTS:
                raise UsageError(f"constraint {c!r}: 'none' or 'nonneg'")
            return c
        opts.append(("constraint", ",".join(_per_mode(constraint, "constraint", ndim,
                                                      conv_c))))
    for name, pen in (("l1", l1), ("l2", l2)):
        if pen is not None:
            def conv_p(v: Any, name: str = name) -> str:
                x = _as_real(v, name)
                if x < 0:
                    raise UsageError(f"{name} must be 0 or more, not {x}")
                return repr(x)
            opts.append((name, ",".join(_per_mode(pen, name, ndim, conv_p))))
    if gpus is not None:
        g = _as_int(gpus, "gpus")
        if g < 0:
            raise UsageError(f"gpus must be 0 (the CPU) or more, not {g}")
        opts.append(("gpus", str(g)))
    if not isinstance(memory, str):
        raise TypeError(f"memory must be a string, not {type(memory).__name__}")
    if memory not in _MEMORIES:
        raise UsageError(f"memory {memory!r}: one of {', '.join(_MEMORIES)}")
    if memory != "auto":
        opts.append(("memory", memory))
    prec = precision if isinstance(precision, str) else getattr(np.dtype(precision), "name", "")
    if prec not in _PRECISIONS:
        raise UsageError(f"precision {precision!r}: 'f64' or 'f32'")
    opts.append(("precision", _PRECISIONS[prec]))
    if iters is not None:
        iters = _as_int(iters, "iters")
        if iters < 1:
            raise UsageError(f"iters must be 1 or more, not {iters}")
        opts.append(("iters", str(iters)))
    if tol is not None:
        t = _as_real(tol, "tol")
        if not 0 <= t <= 1:
            raise UsageError(f"tol must be 0 to 1, not {t}")
        opts.append(("tol", repr(t)))
    if seed is not None:
        s = _as_int(seed, "seed")
        if not 0 <= s < 2 ** 64:
            raise UsageError(f"seed must be 0 to 2**64 - 1, not {s}")
        opts.append(("seed", str(s)))
    if threads is not None:
        th = _as_int(threads, "threads")
        if th < 1:
            raise UsageError(f"threads must be 1 or more, not {th}")
        opts.append(("threads", str(th)))
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable")
    if progress is not None and not isinstance(progress, bool):
        raise TypeError("progress must be True, False or None")
    for name, value in (("loss", loss), ("observed", observed)):
        if value is not None:
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a string, not {type(value).__name__}")
            opts.append((name, value))
    if holdout is not None:
        h = _as_real(holdout, "holdout")
        if not 0 <= h < 1:
            raise UsageError(f"holdout must be at least 0 and below 1, not {h}")
        opts.append(("holdout", repr(h)))
    for key, value in more.items():
        if key in ("output", "format", "json", "report", "rows"):
            raise TypeError(f"got an unexpected keyword argument {key!r} (the result "
                            f"is returned, not written)")
        name = key.replace("_", "-")
        if value is None or value is False:
            continue
        opts.append((name, None if value is True else _option_text(value)))
    return opts


def _noop() -> None:
    """A Python call: a pending signal's handler runs at its start."""


def cp(tensor: Union[Tensor, PathLike], rank: int, method: str = "als",
       constraint: Optional[Union[str, Sequence[str]]] = None,
       l1: Optional[Union[float, Sequence[float]]] = None,
       l2: Optional[Union[float, Sequence[float]]] = None,
       gpus: Optional[int] = None, memory: str = "auto", precision: str = "f64",
       iters: Optional[int] = None, tol: Optional[float] = None,
       seed: Optional[int] = None, init: Any = None,
       callback: Optional[Callable[[ProgressInfo], Any]] = None,
       progress: Optional[bool] = None, threads: Optional[int] = None,
       loss: Optional[str] = None, observed: Optional[str] = None,
       holdout: Optional[float] = None, **more: Any) -> CPResult:
    """CP decomposition of a sparse tensor: ``amped-run`` as a function.

    Each keyword is the ``amped-run`` option of the same name (see
    amped-run(1)); None leaves the library's default.

    Args:
        tensor: a :class:`Tensor`, or a path that :func:`load` reads.
        rank: the rank, 1 to 4096.
        method: "als" (CP-ALS), "ao-admm", "mu", "hals", "cp-apr" (Poisson
            CP of counts: the result's ``loglik``, ``kkt``, ``inner_iters``;
            options ``inner``, ``kappa``, ``kappa_tol``, ``eps_div_zero``,
            ``allow_noninteger=True``, ``kappa_rule``) or "gcp" (generalized
            CP by stochastic gradients, with ``loss``: the result's ``loss``,
            ``loss_exact``, ...; options ``samples_grad``, ``samples_loss``,
            ``epoch_iters``, ``rate``, ``decay``, ``max_fails``,
            ``huber_delta``, ``adam="lazy"``; ``iters`` counts epochs).
        constraint: "none" or "nonneg", for every mode or a list per mode
            (default none; mu: nonneg).
        l1, l2: sparsity and ridge penalties, one value or a list per mode
            (with ``observed="nonzeros"``, l2 is the ridge of each row's
            least squares).
        gpus: 0 for the CPU backend, N for the first N GPUs (default every
            GPU found, else the CPU).
        memory: "auto", "resident", "remap", "stream" or "compressed".
        precision: "f64" or "f32", the MTTKRP's arithmetic.
        iters: at most this many iterations (library default 50).
        tol: stop after an iteration whose fit changed by less (default
            1e-5; 0 runs every iteration).
        seed: seed of the random starting factors (default 1).
        init: start from a model: a path prefix that ``amped-run -o``
            wrote, a :class:`CPResult`, (weights, factors) or a list of
            factors.
        callback: called at each iteration with a :class:`ProgressInfo`;
            returning True stops the run there (the result's ``stopped``).
            An exception it raises stops the run and is raised by cp().
        progress: a progress bar on standard error (tqdm when installed):
            True always, False never, None when standard error is a terminal.
        threads: CPU threads (default the CPUs this process may use).
        loss: method "gcp"'s loss: "gaussian", "poisson", "poisson-log",
            "bernoulli-logit", "bernoulli-odds", "gamma", "rayleigh", "huber".
        observed: "all" (every cell, an absent one a zero: the default) or
            "nonzeros" (completion: fit the stored entries only; the
            result's ``rmse_train``, ``rmse_test``, ``unobserved_rows``).
        holdout: with observed="nonzeros", the share of the stored entries
            kept out of the fit as test entries (drawn from the seed);
            ``holdout_file=PATH`` reads them from a file instead.
        **more: any other amped-run option, underscores for dashes:
            ``devices=[0, 2]``, ``admm_inner=5``, ``overlap=True``,
            ``kappa_tol=1e-8``, ``epoch_iters=100``, ...

    Returns:
        a :class:`CPResult`.

    The GIL is released for the whole run. Ctrl-C (SIGINT) on the main
    thread stops the run at the next iteration, frees every host and GPU
    buffer and raises KeyboardInterrupt.

    Raises:
        TypeError, UsageError (a ValueError): bad arguments, before any work;
        NoDeviceError, CudaError, OutOfMemoryError, ...: the run failed.

    Example:
        >>> res = amped.cp(t, rank=8, method="hals", constraint="nonneg",
        ...                gpus=0, iters=20, progress=False)   # doctest: +SKIP
        >>> res.fit, res.factors[0].shape                      # doctest: +SKIP
        >>> apr = amped.cp(counts, 8, method="cp-apr", gpus=0)  # doctest: +SKIP
        >>> apr.loglik[-1], apr.kkt[-1]                        # doctest: +SKIP
        >>> mc = amped.cp(t, 8, observed="nonzeros", holdout=0.1, l2=0.01,
        ...               gpus=0)                              # doctest: +SKIP
        >>> mc.rmse_train[-1], mc.rmse_test[-1]                # doctest: +SKIP
        >>> g = amped.cp(t, 8, method="gcp", loss="gaussian", iters=20,
        ...              epoch_iters=100, gpus=0)              # doctest: +SKIP
        >>> g.loss, g.loss_exact                               # doctest: +SKIP
    """
    if not isinstance(tensor, Tensor):
        if isinstance(tensor, (str, bytes, os.PathLike)):
            tensor = load(tensor)
        else:
            raise TypeError(f"tensor must be an amped.Tensor (Tensor.from_coo, "
                            f"Tensor.from_sparse, amped.load), not {type(tensor).__name__}")
    shape = tensor.shape
    ndim = len(shape)

    # ---- every argument checked before any work ----
    opts: List[Tuple[str, Optional[str]]] = []
    rank = _as_int(rank, "rank")
    if not 1 <= rank <= _MAX_RANK:
        raise UsageError(f"rank must be 1 to {_MAX_RANK}, not {rank}")
    opts.append(("rank", str(rank)))
    for key in ("starts", "ranks", "choose", "keep_all"):
        if key in more:
            raise TypeError(f"cp() fits one model; {key}= is amped.sweep()'s")
    opts += _run_options(ndim, method, constraint, l1, l2, gpus, memory, precision, iters,
                         tol, seed, threads, callback, progress, loss, observed, holdout, more)
    tmpdirs: List[str] = []
    try:
        if init is not None:
            opts.append(("init", _init_prefix(init, shape, rank, tmpdirs)))
        return _run(tensor, opts, shape, callback, progress, iters)
    finally:
        for d in tmpdirs:
            shutil.rmtree(d, ignore_errors=True)


def _run(tensor: Tensor, opts: List[Tuple[str, Optional[str]]], shape: Tuple[int, ...],
         callback: Optional[Callable[[ProgressInfo], Any]], progress: Optional[bool],
         iters: Optional[int], sweep: bool = False) -> Any:
    o = c_void_p()
    check(_lib_.amped_options_new(byref(o)))
    try:
        for name, value in opts:
            check(_lib_.amped_options_set(o, name.encode(),
                                          None if value is None else value.encode()))
        return _cp_call(tensor, o, shape, callback, progress, iters, sweep)
    finally:
        _lib_.amped_options_free(o)


def _cp_call(tensor: Tensor, o: c_void_p, shape: Tuple[int, ...],
             callback: Optional[Callable[[ProgressInfo], Any]], progress: Optional[bool],
             iters: Optional[int], sweep: bool = False) -> Any:
    bar = make_bar(progress, iters or 50)
    interrupted = [False]
    raised: List[BaseException] = []

    def on_progress(ctx: Any, p: Any) -> int:
        # Runs inside the C call: nothing may escape.
        try:
            if interrupted[0] or raised:
                return 1
            q = p.contents
            phase = _lib.optional_str(q.phase)
            if bar is not None:
                try:
                    bar.update(phase, int(q.done), int(q.total), int(q.iter), q.fit, q.delta)
                except Exception:
                    pass                   # a broken bar never stops a run
            if callback is not None and phase == "iteration":
                info = ProgressInfo(phase, int(q.done), int(q.total), int(q.iter),
                                    float(q.fit), float(q.delta), float(q.seconds),
                                    int(q.model), int(q.rank))
                if callback(info):
                    return 1
            return 1 if interrupted[0] else 0
        except BaseException as e:          # noqa: B902: KeyboardInterrupt included
            raised.append(e)
            return 1

    c_progress = _lib.PROGRESS_FN(on_progress)

    # Ctrl-C: a handler that only sets a flag, which the progress callback
    # turns into a clean stop; KeyboardInterrupt is raised once the library
    # has freed everything. Only on the main thread, and only over a
    # handler Python installed (not SIG_IGN, not a foreign C handler).
    old_handler: Any = None
    installed = False
    if threading.current_thread() is threading.main_thread():
        try:
            old_handler = signal.getsignal(signal.SIGINT)
            if old_handler is not None and old_handler is not signal.SIG_IGN:
                def on_sigint(signum: int, frame: Any) -> None:
                    interrupted[0] = True
                signal.signal(signal.SIGINT, on_sigint)
                installed = True
        except (ValueError, OSError):
            installed = False

    r = c_void_p()
    try:
        with tensor._lock:
            call = _lib_.amped_cp_sweep if sweep else _lib_.amped_cp
            status = call(tensor._h(), o, c_progress, None, byref(r))
        # The C message belongs to this thread: take it before any other call.
        err = None if status == _lib.AMPED_OK else error_for(status)
    finally:
        if installed:
            _noop()                      # a pending SIGINT reaches on_sigint first
            signal.signal(signal.SIGINT, old_handler)
        if bar is not None:
            bar.close()
    try:
        if raised:
            if err is not None:
                raise raised[0] from err
            raise raised[0]
        if interrupted[0]:
            if callable(old_handler) and old_handler is not signal.default_int_handler:
                old_handler(signal.SIGINT, None)     # the caller's own handler decides
            else:
                raise KeyboardInterrupt
        if err is not None:
            raise err
        return _sweep_result(r.value, shape) if sweep else _result(r.value, shape)
    finally:
        if r.value:
            (_lib_.amped_sweep_free if sweep else _lib_.amped_result_free)(r)
        del c_progress


# ---- several models: starts and ranks ------------------------------------------------
@dataclass(frozen=True)
class RankSummary:
    """One rank's row of :func:`sweep`'s table (amped-run's): the best
    start (an index into ``models``), the best and worst final fits and
    their spread, and the smallest and median factor match score of the
    other starts against the best (NaN with one start)."""
    rank: int
    best_model: int
    best_fit: float
    worst_fit: float
    fms_min: float
    fms_median: float

    @property
    def spread(self) -> float:
        return self.best_fit - self.worst_fit


@dataclass
class SweepResult:
    """What :func:`sweep` fitted: every model (rank i's start j is
    ``models[i * starts + j]``, each a :class:`CPResult` with its ``seed``
    and ``fms``), the per-rank table, and the rank ``choose`` recommends
    (None where it chose none or none was asked; ``reason`` says why)."""
    models: List[CPResult]
    ranks: List[RankSummary]
    chosen_rank: Optional[int]
    reason: str
    stopped: bool
    seconds: float

    def best(self, rank: Optional[int] = None) -> CPResult:
        """The best start of rank (default the chosen rank, else the only
        rank, else the rank of the best fit)."""
        if rank is None:
            rank = self.chosen_rank
        if rank is None:
            rank = max(self.ranks, key=lambda r: r.best_fit).rank
        for r in self.ranks:
            if r.rank == rank:
                return self.models[r.best_model]
        raise UsageError(f"rank {rank} was not swept (ranks {[r.rank for r in self.ranks]})")

    def __repr__(self) -> str:
        return (f"<amped.SweepResult {len(self.models)} models, ranks "
                f"{[r.rank for r in self.ranks]}, chosen {self.chosen_rank}>")


def _sweep_result(w: int, shape: Tuple[int, ...]) -> SweepResult:
    models = []
    for k in range(int(_lib_.amped_sweep_models(w))):
        res = _result(_lib_.amped_sweep_model(w, k), shape)
        res.seed = int(_lib_.amped_sweep_seed(w, k))
        res.fms = float(_lib_.amped_sweep_fms(w, k))
        models.append(res)
    rows = []
    for i in range(int(_lib_.amped_sweep_ranks(w))):
        x = _lib.RankSummary()
        check(_lib_.amped_sweep_rank(w, i, byref(x)))
        rows.append(RankSummary(int(x.rank), int(x.best_model), float(x.best_fit),
                                float(x.worst_fit), float(x.fms_min), float(x.fms_median)))
    why = c_char_p()
    chosen = int(_lib_.amped_sweep_chosen(w, byref(why)))
    return SweepResult(models=models, ranks=rows, chosen_rank=chosen or None,
                       reason=_lib.optional_str(why.value),
                       stopped=bool(_lib_.amped_sweep_stopped(w)),
                       seconds=float(_lib_.amped_sweep_seconds(w)))


def sweep(tensor: Union[Tensor, PathLike], ranks: Union[int, Sequence[int]],
          starts: int = 1, choose: Optional[Union[str, Tuple[str, float]]] = None,
          method: str = "als", constraint: Optional[Union[str, Sequence[str]]] = None,
          l1: Optional[Union[float, Sequence[float]]] = None,
          l2: Optional[Union[float, Sequence[float]]] = None,
          precision: str = "f64", iters: Optional[int] = None, tol: Optional[float] = None,
          seed: Optional[int] = None,
          callback: Optional[Callable[[ProgressInfo], Any]] = None,
          progress: Optional[bool] = None, threads: Optional[int] = None,
          **more: Any) -> SweepResult:
    """Several starts at several ranks fitted together: ``amped-run
    --starts K --ranks R1,R2,.. --choose RULE`` as a function, on the CPU.

    Args:
        tensor: a :class:`Tensor`, or a path that :func:`load` reads.
        ranks: one rank or several (each 1 to 4096; ascending in the table).
        starts: random starts at each rank, seeds seed, seed + 1, ...
        choose: None, "fit-elbow" (two ranks or more) or ("fms", F) /
            "fms F": the largest rank whose starts' median FMS against the
            best start is at least F (two starts or more).
        method: "als", "ao-admm", "mu" or "hals" (not cp-apr, gcp or
            observed="nonzeros", as amped-run).
        callback: as :func:`cp`'s; ``info.model`` and ``info.rank`` say
            whose iteration it is. Returning True stops every model there.
        gpus: None or 0, the CPU (the default for a batch, as amped-run's);
            1, one GPU (resident or streamed by memory=). More are refused.
        The other keywords are :func:`cp`'s.

    Returns:
        a :class:`SweepResult`: ``models`` (each a :class:`CPResult` with
        ``seed`` and ``fms``), ``ranks`` (:class:`RankSummary` rows),
        ``chosen_rank`` and ``reason``.

    Example:
        >>> sw = amped.sweep(t, ranks=[2, 4, 8], starts=4, choose=("fms", 0.9),
        ...                  iters=50, progress=False)          # doctest: +SKIP
        >>> [(r.rank, r.best_fit, r.fms_median) for r in sw.ranks]  # doctest: +SKIP
        >>> sw.chosen_rank, sw.best().factors                  # doctest: +SKIP
    """
    if not isinstance(tensor, Tensor):
        if isinstance(tensor, (str, bytes, os.PathLike)):
            tensor = load(tensor)
        else:
            raise TypeError(f"tensor must be an amped.Tensor (Tensor.from_coo, "
                            f"Tensor.from_sparse, amped.load), not {type(tensor).__name__}")
    shape = tensor.shape
    if isinstance(ranks, (bool, np.bool_)) or not isinstance(ranks, (numbers.Integral, Sequence,
                                                                     np.ndarray)):
        raise TypeError(f"ranks must be an integer or a sequence of them, not "
                        f"{type(ranks).__name__}")
    rank_list = ([_as_int(ranks, "ranks")] if isinstance(ranks, numbers.Integral)
                 else [_as_int(r, "ranks") for r in ranks])
    if not rank_list:
        raise UsageError("ranks: give one rank or more")
    for r in rank_list:
        if not 1 <= r <= _MAX_RANK:
            raise UsageError(f"ranks: each must be 1 to {_MAX_RANK}, not {r}")
    k = _as_int(starts, "starts")
    if k < 1:
        raise UsageError(f"starts must be 1 or more, not {k}")
    opts: List[Tuple[str, Optional[str]]] = [("ranks", ",".join(str(r) for r in rank_list)),
                                             ("starts", str(k))]
    if choose is not None:
        if isinstance(choose, str):
            text = choose
        elif isinstance(choose, (tuple, list)) and len(choose) == 2 and choose[0] == "fms":
            text = f"fms {_as_real(choose[1], 'choose fms')!r}"
        else:
            raise TypeError("choose must be 'fit-elbow', 'fms F' or ('fms', F)")
        opts.append(("choose", text))
    for key in ("init", "rank", "keep_all", "observed", "holdout", "loss"):
        if key in more:
            raise TypeError(f"sweep() takes no {key}= (random starts, the methods als, "
                            f"ao-admm, mu and hals)")
    # The CPU unless gpus=1 asks for one GPU (amped-run's rule for a batch).
    gpus = more.pop("gpus", None)
    memory = more.pop("memory", "auto")
    opts += _run_options(len(shape), method, constraint, l1, l2, gpus, memory, precision,
                         iters, tol, seed, threads, callback, progress, None, None, None, more)
    return _run(tensor, opts, shape, callback, progress, iters, sweep=True)


# ---- the library and its devices ---------------------------------------------------
@dataclass(frozen=True)
class DeviceInfo:
    """A GPU this build sees (amped_device_get)."""
    ordinal: int
    name: str
    compute_capability: Tuple[int, int]
    sm_count: int
    total_memory: int
    free_memory: int


def devices() -> List[DeviceInfo]:
    """The GPUs this build can use ([] without CUDA or without a GPU)."""
    out = []
    for i in range(max(0, int(_lib_.amped_device_count()))):
        d = _lib.Device()
        check(_lib_.amped_device_get(i, byref(d)))
        out.append(DeviceInfo(ordinal=int(d.ordinal),
                              name=d.name.decode("utf-8", "replace"),
                              compute_capability=(int(d.cc_major), int(d.cc_minor)),
                              sm_count=int(d.sm_count), total_memory=int(d.total_memory),
                              free_memory=int(d.free_memory)))
    return out


def version() -> str:
    """libamped's version string ("0.1.0")."""
    return _lib.optional_str(_lib_.amped_version_string())


def build_info() -> Dict[str, str]:
    """What the loaded libamped was built with, from its "key: value" lines:
    ``build_info()["cuda"]`` says whether the GPU backend is there."""
    info: Dict[str, str] = {}
    for line in _lib.optional_str(_lib_.amped_build_info()).splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    return info


__version__ = version()
