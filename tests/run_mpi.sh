#!/bin/sh
# amped-run as several processes under mpirun (the CPU backend, --gpus 0):
# 1, 2 and 3 processes (oversubscribed on a small machine) against the
# one-process run from the same start, every method, on the bundled
# sample, random 3- to 5-mode tensors and ../shared/data: the fit of every
# iteration (JSON, 17 digits) within 1e-12 and the factor files within 1e-10
# (relative); one report, one row per process. Then failures: one process
# given a file that is not there, and one killed mid-run, must end the job
# with a non-zero status within seconds, naming the process, and leave no
# output file. And each process's shards, nonzeros and rows per mode (the
# JSON report and the table on stdout) against tests/mpi_stats.py's own
# count from the file's shard table and the .tns.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_program "$AMPED_PREP" "$AMPED_RUN" "$AMPED_GEN"

"$AMPED_RUN" --version | grep -q '^MPI: yes' || skip_all "amped-run is built without MPI"
MPIRUN=$(command -v mpirun) || skip_all "MPI is built in but there is no mpirun on PATH"
# OpenMPI refuses root (CI runs as root) unless told twice; and a machine
# of 2 cores takes 3 processes only when oversubscribing. Both are the
# test's business, never the program's.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
# OpenMPI's own allocations live to the end: leaks of MPI, not of amped.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
export ASAN_OPTIONS
if "$MPIRUN" --version 2>/dev/null | grep -q 'Open MPI'; then
    MPI_FLAGS="--oversubscribe --bind-to none"
else
    MPI_FLAGS=
fi

# mpirun -np N, with a limit so that a hang fails instead of stalling.
mpi() {
    _np=$1
    shift
    # shellcheck disable=SC2086
    timeout 120 "$MPIRUN" $MPI_FLAGS -np "$_np" "$@"
}

# compare NAME FILE NPS METHOD OPTIONS...: the one-process run, then one
# under mpirun for each process count in NPS, from the same seed. The
# processes add their sums in another order than one process's threads:
# in f64 that moves the last bits (fits 2.2e-13 apart at most here,
# factors 1.2e-12, on aminoacid, whose fit nears 0.98), in f32
# (TOL_F32=1) the MTTKRP's rounding, some 1e-7 of the fit.
compare() {
    _name=$1 _amp=$2 _nps=$3 _method=$4
    shift 4
    _tol_fit=1e-12 _tol_factor=1e-10
    test -n "${TOL_F32:-}" && _tol_fit=1e-6 _tol_factor=1e-4
    set -- --gpus 0 -t 1 --tol 0 --method "$_method" "$@"
    rm -f "$T"/one.*
    run "$AMPED_RUN" -q "$@" -o "$T/one" --json "$T/one.json" "$_amp"
    if test "$RUN_RC" -ne 0; then
        fail "$_name $_method: the one-process run exits 0"
        diag_run
        return
    fi
    fits "$T/one.json" >"$T/one.fits"
    for _np in $_nps; do
        rm -f "$T"/many.*
        run mpi "$_np" "$AMPED_RUN" "$@" -o "$T/many" --json "$T/many.json" "$_amp"
        _l="$_name $_method, $_np processes"
        if test "$RUN_RC" -ne 0; then
            fail "$_l: exit 0"
            diag_run
            continue
        fi
        fits "$T/many.json" >"$T/many.fits"
        within "$_l: every iteration's fit as one process's" \
            "$(max_diff "$T/one.fits" "$T/many.fits")" "$_tol_fit"
        within "$_l: the factor files as one process's" \
            "$(factors_diff "$T/one" "$T/many")" "$_tol_factor"
        _rows=$(grep -c '"process": ' "$T/many.json")
        _finals=$(grep -cE '^final (fit|log-likelihood):' "$RUN_OUT")
        if test "$_rows" -eq "$_np" && test "$_finals" -eq 1; then
            pass "$_l: one report, with $_np rows of processes"
        else
            fail "$_l: one report ($_finals final fits), $_np rows of processes ($_rows)"
            diag_run
        fi
    done
}

run "$AMPED_PREP" -q -o "$T/sample.amp" "$top_srcdir/data/sample.tns.zst"
check_status "the bundled sample prepares" 0

# Every method, 1 to 3 processes; shards of 8 so each process has several.
for m in als ao-admm mu hals; do
    case $m in
    als) opts= ;;
    *) opts="--constraint nonneg" ;;
    esac
    # shellcheck disable=SC2086
    compare sample "$T/sample.amp" "1 2 3" $m -r 6 --iters 6 $opts
done

# Random tensors of 3, 4 and 5 modes, small shards (so a process may own
# none of a mode's rows), f32 values and the f32 MTTKRP once.
for spec in "3 600,500,400" "4 90,80,70,60" "5 30,25,20,15,10"; do
    set -- $spec
    run "$AMPED_GEN" -o "$T/gen$1.tns" --nnz 20000 --dims "$2" --seed "$1"
    check_status "a random $1-mode tensor" 0
    run "$AMPED_PREP" -q --shards 5 -o "$T/gen$1.amp" "$T/gen$1.tns"
    check_status "the $1-mode tensor prepares" 0
    compare "random $1 modes" "$T/gen$1.amp" "2 3" als -r 5 --iters 5
    compare "random $1 modes" "$T/gen$1.amp" "3" hals -r 5 --iters 5 --constraint nonneg
done
# Poisson CP (issue 42): each process's rows, the KKT violation's largest
# and the log-likelihood's sum over the processes, every mode's rows to all.
compare sample "$T/sample.amp" "2 3" cp-apr -r 4 --iters 4
compare "random 4 modes" "$T/gen4.amp" "3" cp-apr -r 5 --iters 4 --allow-noninteger
TOL_F32=1
compare "random 3 modes, f32 MTTKRP" "$T/gen3.amp" "2" als -r 5 --iters 5 --precision f32
TOL_F32=

# The tensors of ../shared/data, as far as they are here.
n_real=0
for tns in "$AMP_TEST_DATA"/*.tns; do
    test -f "$tns" || continue
    name=$(basename "$tns" .tns)
    run "$AMPED_PREP" -q --shards 16 -o "$T/$name.amp" "$tns"
    check_status "$name prepares" 0
    compare "$name" "$T/$name.amp" "2 3" als -r 4 --iters 5
    compare "$name" "$T/$name.amp" "2" ao-admm -r 4 --iters 4 --constraint nonneg
    n_real=$((n_real + 1))
done
if test "$n_real" -eq 0; then
    if test "${CI:-}" = true; then
        fail "the tensors of AMP_TEST_DATA=$AMP_TEST_DATA (CI=true needs them)"
    else
        skip "the tensors of ../shared/data" "none in AMP_TEST_DATA=$AMP_TEST_DATA"
    fi
fi

# ---- the processes' statistics (issue 40) ---------------------------------
# Each process's shards, nonzeros and rows per mode, in the JSON report and
# the table on stdout, against tests/mpi_stats.py's own count (and the
# tensor's nonzeros, dimensions and nonempty slices; mode 1 of the 3-mode
# tensor has empty slices): the shard
# table read from the file (stored uncompressed), each shard's nonzeros
# counted in the .tns, the shards dealt as the partition deals them. The
# checker must also reject a report with one count changed.
if command -v python3 >/dev/null 2>&1; then
    STATS="$top_srcdir/tests/mpi_stats.py"
    for spec in "3 400,50,40 5" "4 20,30,25,15 7"; do
        set -- $spec
        run "$AMPED_GEN" -o "$T/st$1.tns" --nnz 3000 --dims "$2" --seed "$1$3"
        check_status "statistics: a random $1-mode tensor" 0
        run "$AMPED_PREP" -q --level 0 --shards "$3" -o "$T/st$1.amp" "$T/st$1.tns"
        check_status "statistics: the $1-mode tensor prepares uncompressed, $3 shards" 0
        for np in 2 3; do
            rm -f "$T/st.json"
            run mpi "$np" "$AMPED_RUN" --gpus 0 -t 1 -r 3 --iters 2 -o "$T/st" \
                --json "$T/st.json" "$T/st$1.amp"
            check_status "statistics: $1 modes, $np processes run" 0
            cp "$RUN_OUT" "$T/st.out"
            if python3 "$STATS" "$T/st$1.amp" "$T/st$1.tns" "$T/st.json" "$T/st.out" "$np" \
                >"$T/st.diff" 2>&1; then
                pass "statistics: $1 modes, $np processes: shards, nonzeros and rows per process as counted"
            else
                fail "statistics: $1 modes, $np processes: shards, nonzeros and rows per process as counted"
                sed 's/^/# /' "$T/st.diff"
            fi
        done
        sed 's/"nnz": \[\([0-9]*\)/"nnz": [1\1/' "$T/st.json" >"$T/st.bad.json"
        if python3 "$STATS" "$T/st$1.amp" "$T/st$1.tns" "$T/st.bad.json" "$T/st.out" 3 \
            >/dev/null 2>&1; then
            fail "statistics: the checker rejects a report with one process's nonzeros changed"
        else
            pass "statistics: the checker rejects a report with one process's nonzeros changed"
        fi
    done
else
    skip "the processes' statistics" "no python3"
fi

# ---- threads ------------------------------------------------------------
# Processes the launcher leaves unbound (Open MPI's --bind-to none here)
# share the host's CPUs: without -t each starts its share of them, not a
# thread a CPU; -t and OMP_NUM_THREADS are kept as given. The user's own
# OMP_NUM_THREADS and OMP_THREAD_LIMIT (which nproc reads too) are set
# aside for the section.
threads_of() {   # FILE: every process's "threads" in the report, in order
    sed -n 's/.*"process": [0-9]*,.*"threads": \([0-9]*\).*/\1/p' "$1" | tr '\n' ' ' |
        sed 's/ $//'
}
if test -z "$MPI_FLAGS"; then
    skip "processes sharing CPUs" "only Open MPI's mpirun is told here not to bind them"
else
    saved_omp=${OMP_NUM_THREADS-unset} saved_limit=${OMP_THREAD_LIMIT-unset}
    unset OMP_NUM_THREADS OMP_THREAD_LIMIT
    ncpu=$(nproc)
    share=$((ncpu / 2))
    test "$share" -ge 1 || share=1
    run mpi 2 "$AMPED_RUN" --gpus 0 -r 4 --iters 2 --json "$T/thr.json" "$T/gen3.amp"
    check_status "2 processes, no -t: exit 0" 0
    is "2 processes sharing $ncpu CPUs, no -t: $share thread(s) each" \
        "$(threads_of "$T/thr.json")" "$share $share"
    check_contains "... the report says it is their share" "$RUN_OUT" \
        "threads:   $share in process 0 (its share; its $ncpu CPU"
    run mpi 3 "$AMPED_RUN" --gpus 0 -t 2 -r 4 --iters 2 --json "$T/thr.json" "$T/gen3.amp"
    is "3 processes, -t 2: 2 threads each" "$(threads_of "$T/thr.json")" "2 2 2"
    OMP_NUM_THREADS=3
    export OMP_NUM_THREADS
    run mpi 2 "$AMPED_RUN" --gpus 0 -r 4 --iters 2 --json "$T/thr.json" "$T/gen3.amp"
    unset OMP_NUM_THREADS
    is "2 processes, OMP_NUM_THREADS=3: 3 threads each" "$(threads_of "$T/thr.json")" "3 3"
    check_contains "... the report says where from" "$RUN_OUT" "(OMP_NUM_THREADS;"
    test "$saved_omp" = unset || export OMP_NUM_THREADS="$saved_omp"
    test "$saved_limit" = unset || export OMP_THREAD_LIMIT="$saved_limit"
fi

# ---- failures -----------------------------------------------------------
# leftovers PREFIX: the files a run would have written, done or not.
leftovers() {
    ls -d "$1"* "$T"/.*tmp* 2>/dev/null
}

# Process 1 is given a file that is not there; process 0 the real one.
cat >"$T/one-missing.sh" <<EOF
#!/bin/sh
rank=\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}
if test "\$rank" = 1; then f="$T/not-there.amp"; else f="$T/sample.amp"; fi
exec "$AMPED_RUN" --gpus 0 -t 1 -r 4 --iters 5 -o "$T/fail" --json "$T/fail.json" "\$f"
EOF
start=$(date +%s)
run mpi 2 sh "$T/one-missing.sh"
took=$(($(date +%s) - start))
if test "$RUN_RC" -ne 0 && test "$RUN_RC" -ne 124; then
    pass "a missing file on process 1: a non-zero exit ($RUN_RC) in ${took} s"
else
    fail "a missing file on process 1: a non-zero exit, not $RUN_RC"
    diag_run
fi
check_contains "process 1 says it failed, with its host" "$RUN_ERR" "process 1 of 2 (host "
check_contains "and why" "$RUN_ERR" "not-there.amp"
check_contains "process 0 names process 1" "$RUN_ERR" "process 1 (host "
is "no output file" "$(leftovers "$T/fail")" ""

# Process 1 killed mid-run (a long run, its pid written by the wrapper):
# the launcher must end the job, not wait for ever.
cat >"$T/long.sh" <<EOF
#!/bin/sh
rank=\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}
echo \$\$ >"$T/pid.\$rank"
exec "$AMPED_RUN" --gpus 0 -t 1 -r 8 --iters 1000000 --tol 0 -o "$T/killed" "$T/sample.amp"
EOF
mpi 2 sh "$T/long.sh" >"$T/long.out" 2>"$T/long.err" &
job=$!
waited=0
while ! grep -q '^ *3 ' "$T/long.out" 2>/dev/null && test "$waited" -lt 60; do
    sleep 1
    waited=$((waited + 1))
done
if test -s "$T/pid.1"; then
    kill -9 "$(cat "$T/pid.1")"
    start=$(date +%s)
    wait "$job"
    rc=$?
    took=$(($(date +%s) - start))
    if test "$rc" -ne 0 && test "$took" -le 30; then
        pass "process 1 killed mid-run: the job ends ($rc) in ${took} s"
    else
        fail "process 1 killed mid-run: exit $rc after ${took} s (non-zero within 30 s wanted)"
        diag_file stderr "$T/long.err"
    fi
    check "and the launcher says so" test -s "$T/long.err"
    is "no factor file" "$(leftovers "$T/killed")" ""
else
    kill "$job" 2>/dev/null
    wait "$job"
    fail "process 1 killed mid-run: the run never started"
    diag_file stderr "$T/long.err"
fi

# GPUs: where there are none, mpirun without --gpus runs the CPU backend
# in every process, and --gpus 1 stops every process, each saying why.
# (tests/mpi_gpu.sh checks a machine of 2 GPUs.)
if ! "$AMPED_RUN" --list-devices >/dev/null 2>&1; then
    run mpi 2 "$AMPED_RUN" -t 1 -r 4 --iters 2 "$T/sample.amp"
    check_status "no GPU, no --gpus: 2 processes run" 0
    check_contains "no GPU, no --gpus: on the CPU" "$RUN_OUT" "backend:   cpu"
    run mpi 2 "$AMPED_RUN" --gpus 1 -t 1 -r 4 --iters 2 -o "$T/nogpu" --json "$T/nogpu.json" \
        "$T/sample.amp"
    check_status "no GPU, --gpus 1: refused" 1
    check_contains "no GPU, --gpus 1: process 0 says why" "$RUN_ERR" \
        "process 0 of 2 (host "
    check_contains "no GPU, --gpus 1: process 1 says why" "$RUN_ERR" \
        "process 1 of 2 (host "
    check_contains "no GPU, --gpus 1: what to do instead" "$RUN_ERR" "--gpus 0 runs on the CPU"
    is "no GPU, --gpus 1: no output file" "$(leftovers "$T/nogpu")" ""
else
    skip "mpirun on a machine without GPUs" "this one has a GPU (tests/mpi_gpu.sh)"
fi

run mpi 2 "$AMPED_RUN" --mttkrp-only "$T/sample.amp"
check_status "--mttkrp-only under mpirun: refused" 1
check_contains "--mttkrp-only under mpirun: says so" "$RUN_ERR" "not under mpirun"

done_testing
