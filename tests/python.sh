#!/bin/sh
# The Python package (python/, module amped) over the libamped of this
# build tree: python/tests/run_tap.py runs python/tests/test_*.py and
# prints their TAP. Fits and factors against amped-run's, .amp bytes
# against amped-prep's, bad input, TensorLy and pyttb, stopping a run
# (callback, SIGINT), the README's example.
#
# The python is AMP_TEST_PYTHON, else python3. Without NumPy the script
# says SKIP; under CI (CI=true) that, or a missing tensorly, pyttb or
# sparse, is a failure. A library built with AddressSanitizer is run with
# libasan preloaded (python is not built with it) and leaks checked in a
# child process of its own (python/tests/test_leaks.py).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP"
need_program "$AMPED_RUN"
PY=${AMP_TEST_PYTHON:-python3}

if ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
    if test "${CI:-}" = true; then
        echo "Bail out! no NumPy in $PY (CI=true needs it: .ci/run sets AMP_TEST_PYTHON)"
        exit 1
    fi
    skip_all "no NumPy in $PY (AMP_TEST_PYTHON names a python that has it)"
fi

AMPED_LIB=$top_builddir/lib/.libs/libamped.so
if ! test -f "$AMPED_LIB"; then
    echo "Bail out! $AMPED_LIB is not built (make check builds lib/libamped.la)"
    exit 1
fi
AMPED_TEST_BUILDDIR=$top_builddir
# No __pycache__ in the source tree (read-only under distcheck).
PYTHONDONTWRITEBYTECODE=1
export AMPED_LIB AMPED_TEST_BUILDDIR PYTHONDONTWRITEBYTECODE

# A sanitizer build: the ASan runtime must come first in the process, and
# python's own allocations at exit are no leak of amped's (test_leaks.py
# looks for those, by the frames of libamped in each report).
asan=$(ldd "$AMPED_LIB" 2>/dev/null | sed -n 's/.*libasan[^ ]* => \([^ ]*\).*/\1/p' | head -n 1)
if test -n "$asan"; then
    # libstdc++ too, now: ASan intercepts __cxa_throw only where it is
    # loaded at start (scipy's C++ throws, through pyttb and tensorly).
    cxx=$("$PY" -c 'import ctypes.util; print(ctypes.util.find_library("stdc++") or "")' 2>/dev/null)
    LD_PRELOAD=$asan${cxx:+ $cxx}${LD_PRELOAD:+ $LD_PRELOAD}
    AMPED_TEST_ASAN_OPTIONS=${ASAN_OPTIONS:-}
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
    export LD_PRELOAD ASAN_OPTIONS AMPED_TEST_ASAN_OPTIONS
fi

TMPDIR=$T
export TMPDIR
"$PY" "$top_srcdir/python/tests/run_tap.py"
