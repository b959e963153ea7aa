#!/bin/bash
# On a GPU machine, from the source tree, with a build staged by
# bench/gpu-carry.sh in DIR: tests and benches, each one's log kept in
# /tmp/gpu-session/ and packed into $OUT/logs.tgz, a line each in
# $OUT/summary.txt (so that few files come back).
#
#   bash bench/gpu-session.sh DIR WHAT...
#
# WHAT: tests (the GPU test programs, two at a time, then the shell tests
# that take a GPU), or a test's name (test_gpu_gcp, run_gcp, ...), or a
# bench: bench-gcp, bench-apr, bench-completion, bench-starts (one GPU,
# resident), bench-starts-stream, bench-python (the package's overhead on
# a GPU), gpu (bench-gpu.sh). Bench data in AMP_BENCH_DIR
# (/tmp/benchdata, kept while the machine stays warm). TL: seconds a test
# may take (300); BT: seconds a bench may take (300).
set -u
staged=$(cd "$1" && pwd)
shift
R=$(pwd)
export LD_LIBRARY_PATH=$staged/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export top_builddir=$staged top_srcdir=$R AMP_TEST_DATA=$staged/data AMP_BASELINES=$staged/baselines
export AMP_BENCH_DIR=${AMP_BENCH_DIR:-/tmp/benchdata} AMP_PYTHON=${AMP_PYTHON:-python3}
O=${OUT:-/tmp/gpu-session-out}
L=/tmp/gpu-session
mkdir -p "$O" "$L" "$AMP_BENCH_DIR"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$O/summary.txt" 2>&1
t0=$(date +%s)
line() {   # name log rc seconds
    printf '%-24s ok %4s not-ok %3s skip %3s rc %s %ss\n' "$1" "$(grep -c '^ok' "$2")" \
        "$(grep -c '^not ok' "$2")" "$(grep -ci '# skip' "$2")" "$3" "$4" | tee -a "$O/summary.txt"
}
one() {    # name command...
    local n=$1 s
    shift
    s=$(date +%s)
    timeout "${TL:-300}" "$@" > "$L/$n.log" 2>&1
    line "$n" "$L/$n.log" $? $(($(date +%s) - s))
}
bench() {  # name script [env...]
    local n=$1 b=$2 s
    shift 2
    s=$(date +%s)
    (cd "$staged" && env "$@" timeout "${BT:-300}" sh "$R/bench/$b") > "$L/$n.log" 2>&1
    echo "$n rc $? $(($(date +%s) - s))s" >> "$O/summary.txt"
    grep -v '^ *$' "$L/$n.log" | tail -n 12 >> "$O/summary.txt"
}
for w in "$@"; do
    case $w in
    tests)
        for p in test_gpu_gcp test_gpu_apr test_gpu_completion test_libamped \
            test_libamped_methods test_gpu test_gpu_remap test_gpu_process; do
            one "$p" "$staged/tests/$p" &
            while [ "$(jobs -r | wc -l)" -ge 2 ]; do sleep 1; done
        done
        wait
        for s in run_gcp run_completion run_apr gpu_starts python gpu_faults; do
            one "$s" bash "$R/tests/$s.sh"
        done ;;
    test_*) one "$w" "$staged/tests/$w" ;;
    run_* | gpu_* | python) one "$w" bash "$R/tests/$w.sh" ;;
    bench-gcp) bench "$w" bench-gcp.sh ;;
    bench-apr) bench "$w" bench-apr.sh ;;
    bench-completion) bench "$w" bench-completion.sh AMP_CMP_CPU=0 ;;
    bench-starts) bench "$w" bench-starts.sh AMP_GPUS=1 ;;
    bench-starts-stream) bench "$w" bench-starts.sh AMP_GPUS=1 AMP_MEMORY=stream ;;
    bench-python) bench "$w" bench-python.sh AMP_PY_CPU=0 AMP_PY_PARTS=overhead ;;
    gpu) bench "$w" bench-gpu.sh ;;
    *) echo "gpu-session: unknown: $w" | tee -a "$O/summary.txt" ;;
    esac
done
grep -h '^not ok' "$L"/*.log 2>/dev/null | head -n 40 > "$O/not-ok.txt"
tar czf "$O/logs.tgz" -C /tmp gpu-session
echo "total $(($(date +%s) - t0))s" >> "$O/summary.txt"
cat "$O/summary.txt" "$O/not-ok.txt"
