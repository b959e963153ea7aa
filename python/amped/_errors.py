"""amped's exceptions: one family, one class per amped_status."""
from __future__ import annotations

from typing import Dict, Optional, Type

from . import _lib

__all__ = ["Error", "UsageError", "OutOfMemoryError", "FileError", "ParseError",
           "RangeError", "FormatError", "CorruptError", "ChecksumError", "VersionError",
           "TruncatedError", "DuplicateError", "EmptyTensorError", "CudaError",
           "NoDeviceError", "UnsupportedError", "InternalError", "PeerError"]


class Error(Exception):
    """A failure reported by libamped (or an argument refused before the call).

    Attributes:
        status: the amped_status number (amped.h; 0 never appears here).
        name: the status's name without the prefix ("USAGE", "IO", ...).
        message: libamped's message, naming the file, line or section where
            it knows one (amped_last_error()).
    """

    status: int = 0

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        if status is not None:
            self.status = status
        self.name = _lib.STATUS_NAMES.get(self.status, str(self.status))
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message


class UsageError(Error, ValueError):
    """An argument or option is invalid (AMPED_ERR_USAGE)."""
    status = 1


class OutOfMemoryError(Error, MemoryError):
    """Host or device memory ran out (AMPED_ERR_NOMEM)."""
    status = 2


class FileError(Error, OSError):
    """Open, read, write or rename failed (AMPED_ERR_IO)."""
    status = 3


class ParseError(Error, ValueError):
    """Malformed input text (AMPED_ERR_PARSE), with its file and line."""
    status = 4


class RangeError(Error, ValueError):
    """A number outside its range, such as an index beyond its dimension
    (AMPED_ERR_RANGE)."""
    status = 5


class FormatError(Error, ValueError):
    """Not a format this build reads (AMPED_ERR_FORMAT); the base of the
    errors about a file's contents."""
    status = 6


class CorruptError(FormatError):
    """A file's structure is inconsistent (AMPED_ERR_CORRUPT)."""
    status = 7


class ChecksumError(CorruptError):
    """A stored checksum does not match (AMPED_ERR_CHECKSUM)."""
    status = 8


class VersionError(FormatError):
    """A format version this build cannot read (AMPED_ERR_VERSION)."""
    status = 9


class DuplicateError(Error, ValueError):
    """Repeated coordinates where none are allowed (AMPED_ERR_DUPLICATE)."""
    status = 10


class EmptyTensorError(Error, ValueError):
    """No nonzeros (AMPED_ERR_EMPTY)."""
    status = 11


class CudaError(Error, RuntimeError):
    """A CUDA call failed (AMPED_ERR_CUDA)."""
    status = 12


class NoDeviceError(Error, RuntimeError):
    """No usable GPU (AMPED_ERR_NO_DEVICE)."""
    status = 13


class UnsupportedError(Error, RuntimeError):
    """Valid, but not in this build or not for this input
    (AMPED_ERR_UNSUPPORTED)."""
    status = 14


class InternalError(Error, RuntimeError):
    """A bug in amped (AMPED_ERR_INTERNAL): please report it."""
    status = 15


class TruncatedError(CorruptError):
    """A file ends before the data it declares (AMPED_ERR_TRUNCATED)."""
    status = 16


class PeerError(Error, RuntimeError):
    """Another process or GPU of the run failed (AMPED_ERR_PEER)."""
    status = 17


_BY_STATUS: Dict[int, Type[Error]] = {
    cls.status: cls for cls in (UsageError, OutOfMemoryError, FileError, ParseError,
                                RangeError, FormatError, CorruptError, ChecksumError,
                                VersionError, DuplicateError, EmptyTensorError, CudaError,
                                NoDeviceError, UnsupportedError, InternalError,
                                TruncatedError, PeerError)
}


def error_for(status: int, message: Optional[str] = None) -> Error:
    """The exception for a status a libamped call returned, carrying the
    calling thread's amped_last_error() (or message)."""
    if message is None:
        message = _lib.last_error()
    if not message:
        message = _lib.strerror(status) or f"amped status {status}"
    cls = _BY_STATUS.get(status, Error)
    return cls(message, status)


def check(status: int) -> None:
    """Raise the exception for a libamped status other than AMPED_OK."""
    if status != _lib.AMPED_OK:
        raise error_for(status)
