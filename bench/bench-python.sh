#!/bin/sh
# The Python package (module amped, over libamped) against the programs and
# against the Python tools a user would use otherwise: issue 41's "Speed and
# memory". Each figure with wall time and peak RSS, each run a fresh process
# (the worker, bench/python-bench.py, says how each is taken).
#
#   overhead  a 20-iteration CP-ALS (--tol 0) on cpu20m, --gpus 0: amped-run
#             against amped.load + amped.cp, median of 3 each, interleaved;
#             with a GPU (amped-run --list-devices), the same on rd100m with
#             --gpus 1. Target: Python at most 2% over amped-run.
#   fromcoo   Tensor.from_coo of cpu20m's 19.9 M nonzeros read from its FROSTT
#             .bin into NumPy, against amped-prep cpu20m.bin -o x.amp. Target:
#             no slower, and at most one extra copy of the coordinates.
#   compare   TensorLy parafac (dense, numpy backend) and pyttb cp_als
#             (sptensor) against amped.cp on ../shared/data tensors: seconds
#             an iteration, peak RSS, final fit; a tensor whose dense form
#             does not fit is skipped for TensorLy, with the reason.
#
# Usage: bench/bench-python.sh               (from the build directory)
# Env:   AMP_PYTHON      the Python to run (default: python3); it needs numpy,
#                        and for compare tensorly and pyttb (skipped without)
#        AMPED_LIB       the libamped to load (default: this build's
#                        lib/.libs/libamped.so)
#        PYTHONPATH      where the amped package is, if not installed (the
#                        source tree's python/ is put first)
#        AMP_PY_PARTS    which parts (default: overhead fromcoo compare)
#        AMP_RANK        rank of the overhead runs (default: 16)
#        AMP_ITERS       iterations of the overhead runs (default: 20)
#        AMP_PY_THREADS  CPU threads of every run (default: 2)
#        AMP_REPS        runs of each, for the medians (default: 3)
#        AMP_COMPARE     the tensors to compare on (default: aminoacid, alog
#                        and splatt-med of AMP_TEST_DATA, ../shared/data)
#        AMP_COMPARE_RANK, AMP_COMPARE_ITERS (default: 8 and 10)
#        AMP_BENCH_DIR, AMP_BASELINES as for the other scripts (lib.sh)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
py=${AMP_PYTHON:-python3}
parts=${AMP_PY_PARTS:-overhead fromcoo compare}
rank=${AMP_RANK:-16}
iters=${AMP_ITERS:-20}
threads=${AMP_PY_THREADS:-2}
reps=${AMP_REPS:-3}
real=${AMP_TEST_DATA:-$src/../shared/data}
worker="$here/python-bench.py"
need_built "$prep" "$run"

AMPED_LIB=${AMPED_LIB:-$build/lib/.libs/libamped.so}
[ -f "$AMPED_LIB" ] || { echo "bench: no libamped at $AMPED_LIB (build first, or set AMPED_LIB)" >&2; exit 1; }
PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
export AMPED_LIB PYTHONPATH
"$py" -c 'import numpy, amped' || {
    echo "bench: $py cannot import numpy and amped (AMP_PYTHON, PYTHONPATH)" >&2; exit 1; }

echo "## Python over libamped on $(hostname), $(nproc) CPUs, $(date -u +%Y-%m-%d)"
echo
"$py" -c 'import sys, numpy, amped; print("Python %s, NumPy %s, amped %s (%s)" % (sys.version.split()[0], numpy.__version__, amped.version(), amped.library_path))'
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

for part in $parts; do
    case $part in
    overhead)
        # AMP_PY_CPU=0: the GPU's run alone (on a GPU host, whose CPU run
        # was taken elsewhere).
        if [ "${AMP_PY_CPU:-1}" != 0 ]; then
            need_cpu20m
            amp="$data/cpu20m.amp"
            [ -f "$amp" ] || "$prep" -q -o "$amp" "$tns"
            echo
            "$py" "$worker" overhead --run "$run" --amp "$amp" --label cpu20m --rank "$rank" \
                --iters "$iters" --threads "$threads" --gpus 0 --reps "$reps"
        fi
        if "$run" --list-devices >/dev/null 2>&1; then
            need_rd100m
            amp="$data/rd100m.amp"
            [ -f "$amp" ] || "$prep" -q -o "$amp" "$tns"
            echo
            "$py" "$worker" overhead --run "$run" --amp "$amp" --label "rd100m, one GPU" \
                --rank "$rank" --iters "$iters" --threads "$threads" --gpus 1 --reps "$reps"
        else
            echo
            echo "No GPU (amped-run --list-devices fails): the rd100m run on one GPU is skipped."
        fi
        ;;
    fromcoo)
        need_cpu20m
        bin="$data/cpu20m.bin"
        [ -f "$bin" ] || "$prep" -q -o "$bin" "$tns"
        echo
        "$py" "$worker" fromcoo --prep "$prep" --bin "$bin" --label cpu20m \
            --threads "$threads" --reps "$reps" --workdir "$data"
        ;;
    compare)
        echo
        if ! "$py" -c 'import tensorly, pyttb' 2>/dev/null; then
            echo "compare skipped: $py cannot import tensorly and pyttb" \
                "(pip install tensorly 'pyttb>=1.8,<2')"
            continue
        fi
        "$py" -c 'import tensorly, pyttb; print("TensorLy %s, pyttb %s" % (tensorly.__version__, pyttb.__version__))'
        echo
        set -f
        tensors=${AMP_COMPARE:-$real/aminoacid.tns $real/alog.tns $real/splatt-med.tns}
        # shellcheck disable=SC2086
        "$py" "$worker" compare --rank "${AMP_COMPARE_RANK:-8}" --iters "${AMP_COMPARE_ITERS:-10}" \
            --threads "$threads" --reps "$reps" $tensors
        set +f
        ;;
    *)
        echo "bench: AMP_PY_PARTS: unknown part $part (overhead, fromcoo, compare)" >&2
        exit 1
        ;;
    esac
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
