#!/bin/sh
# amped-run's GPUs under MPI, on a machine of (at least) 2 GPUs, by hand:
# not part of make check, which has no GPU and no second card.
#
#   tests/mpi_gpu.sh BIN [CARRY]
#
# BIN holds amped-run, amped-prep and amped-gen of a build with CUDA, NCCL
# and MPI (copied there, stripped, so that they travel without the build
# tree); CARRY is OpenMPI unpacked by `bench/mpi-gpu.sh carry` (default
# mpi-carry/ of the source tree; an mpirun already on PATH is used when
# there is none). AMP_TEST_DATA: the tensors of ../shared/data (else
# shared/data of the tree). AMP_TENSOR: a large .tns, .bin or .amp to time
# (rd100m or the like), or "rd100m-like" to draw one with amped-gen
# (rd100m's dimensions and exponent, AMP_TIME_NNZ nonzeros, default 30 M);
# AMP_TIME_ONLY=1 leaves out every check but the timing.
#
# Checks, in TAP (ok / not ok lines, a summary at the end):
#  - 2 processes of 1 GPU (mpirun -np 2 amped-run --gpus 1) against 1
#    process of 2 GPUs (--gpus 2) and against the CPU (--gpus 0), every
#    method (CP-APR's log-likelihoods as its fits, on counts), the tensor
#    resident and streamed (--memory stream): every iteration's fit within
#    1e-9 (f64), the factor files of the 2 runs on GPUs within 1e-9, one
#    report with a row per GPU; CP-APR refusing values that are not counts;
#  - 1 process of 2 GPUs under mpirun, --send-parts and --overlap across
#    processes;
#  - --partition equal-nnz refused under mpirun;
#  - failures: process 1 out of GPU memory (--device-memory) and process 1
#    killed mid-run end the job with a non-zero status within seconds,
#    naming the process, host and GPU (the first), leaving no output;
#  - with AMP_TENSOR, the time per iteration of the two against the one,
#    also over NCCL's network transport (NCCL_P2P_DISABLE, NCCL_SHM_DISABLE).
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:?"usage: tests/mpi_gpu.sh BIN [CARRY]"}
bin=$(cd "$bin" && pwd) || exit 1
carry=${2:-$here/mpi-carry}
export top_srcdir="$here"   # for lib.sh
if test -z "${AMP_TEST_DATA:-}" && ! test -d "$here/../shared/data" &&
    test -d "$here/shared/data"; then
    AMP_TEST_DATA=$here/shared/data
fi
. "$here/tests/lib.sh"
AMPED_RUN=$bin/amped-run AMPED_PREP=$bin/amped-prep AMPED_GEN=$bin/amped-gen
test -x "$AMPED_GEN" || AMPED_GEN=$bin/bench/amped-gen   # BIN a build tree
need_program "$AMPED_RUN" "$AMPED_PREP" "$AMPED_GEN"
start_all=$(date +%s)

# ---- OpenMPI: the carried tree (bench/mpi-gpu.sh), else the system's ----
if test -d "$carry/root/usr/bin"; then
    mpi_carry=$carry
    . "$here/bench/mpi-carry.sh"
fi
command -v mpirun >/dev/null 2>&1 || skip_all "no mpirun (bench/mpi-gpu.sh carry makes one)"
"$AMPED_RUN" -V | grep -q '^MPI: yes' || skip_all "amped-run is built without MPI"
"$AMPED_RUN" -V | grep -q '^NCCL: yes' || skip_all "amped-run is built without NCCL"
ngpu=$("$AMPED_RUN" --list-devices 2>/dev/null | grep -c '^GPU ')
test "$ngpu" -ge 2 || skip_all "$ngpu GPUs here; this script needs 2"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
echo "# $(mpirun --version 2>&1 | head -1); $ngpu GPUs; $("$AMPED_RUN" -V | head -1)"

# mpirun -np N with a limit, so that a hang fails instead of stalling;
# the variables that matter here passed on where they are set.
mpi() {
    _np=$1
    shift
    _x=
    for _v in LD_LIBRARY_PATH OPAL_PREFIX PMIX_MCA_mca_base_component_path \
        PMIX_MCA_pcompress_base_silence_warning NCCL_P2P_DISABLE NCCL_SHM_DISABLE; do
        eval "test -n \"\${$_v:-}\"" && _x="$_x -x $_v"
    done
    # shellcheck disable=SC2086
    timeout 120 mpirun --oversubscribe --bind-to none $_x -np "$_np" "$@"
}

# compare NAME FILE METHOD MEMORY OPTIONS...: 2 processes of 1 GPU against
# 1 process of 2 GPUs and the CPU (the CPU's fits kept per tensor and
# method: the memory does not change them).
compare() {
    _name=$1 _amp=$2 _method=$3 _mem=$4
    shift 4
    set -- -t 4 --tol 0 --method "$_method" "$@"
    _l="$_name $_method $_mem"
    _cpu=$T/cpu.$(basename "$_amp").$_method
    if ! test -f "$_cpu.fits"; then
        run "$AMPED_RUN" -q --gpus 0 "$@" --json "$_cpu.json" "$_amp"
        test "$RUN_RC" -eq 0 || { fail "$_l: the CPU run exits 0"; diag_run; return; }
        fits "$_cpu.json" >"$_cpu.fits"
    fi
    rm -f "$T"/one.* "$T"/two.*
    run "$AMPED_RUN" -q --gpus 2 --exchange nccl --memory "$_mem" "$@" -o "$T/one" --json "$T/one.json" "$_amp"
    test "$RUN_RC" -eq 0 || { fail "$_l: 1 process of 2 GPUs exits 0"; diag_run; return; }
    run mpi 2 "$AMPED_RUN" --gpus 1 --memory "$_mem" "$@" -o "$T/two" --json "$T/two.json" "$_amp"
    test "$RUN_RC" -eq 0 || { fail "$_l: 2 processes of 1 GPU exit 0"; diag_run; return; }
    fits "$T/one.json" >"$T/one.fits"
    fits "$T/two.json" >"$T/two.fits"
    within "$_l: 2 processes x 1 GPU, every fit as 1 process x 2 GPUs'" \
        "$(max_diff "$T/one.fits" "$T/two.fits")" 1e-9
    within "$_l: 2 processes x 1 GPU, every fit as the CPU's" \
        "$(max_diff "$_cpu.fits" "$T/two.fits")" 1e-9
    within "$_l: the factor files as 1 process x 2 GPUs'" "$(factors_diff "$T/one" "$T/two")" 1e-9
    _rows=$(grep -c '"gpu": ' "$T/two.json")
    _finals=$(grep -c -e '^final fit:' -e '^final log-likelihood:' "$RUN_OUT")
    if test "$_rows" -eq 2 && test "$_finals" -eq 1 &&
        grep -q '^backend: *2 GPUs of every process joined with NCCL' "$RUN_OUT"; then
        pass "$_l: one report, 2 GPUs of 2 processes joined, a row per GPU"
    else
        fail "$_l: one report ($_finals final fits), 2 rows of GPUs ($_rows)"
        diag_run
    fi
}

prep() {   # NAME SOURCE OPTIONS...: $T/NAME.amp
    _n=$1 _src=$2
    shift 2
    run "$AMPED_PREP" -q -f "$@" -o "$T/$_n.amp" "$_src"
    check_status "$_n prepares" 0
}

# ---- fits ---------------------------------------------------------------
check_fits() {
    run "$AMPED_GEN" -o "$T/gen3.bin" --nnz 300000 --dims 4000,3000,2000 --seed 3
    prep gen3 "$T/gen3.bin" --shards 16
    run "$AMPED_GEN" -o "$T/gen4.bin" --nnz 100000 --dims 200,150,120,90 --seed 4
    prep gen4 "$T/gen4.bin" --shards 6
    for mem in resident stream; do
        compare "random 3 modes" "$T/gen3.amp" als "$mem" -r 8 --iters 6
        compare "random 3 modes" "$T/gen3.amp" ao-admm "$mem" -r 8 --iters 4 --constraint nonneg
        compare "random 3 modes" "$T/gen3.amp" mu "$mem" -r 8 --iters 6
        compare "random 3 modes" "$T/gen3.amp" hals "$mem" -r 8 --iters 6 --constraint nonneg
        compare "random 4 modes" "$T/gen4.amp" als "$mem" -r 6 --iters 5
        compare "random 4 modes" "$T/gen4.amp" hals "$mem" -r 6 --iters 5 --constraint nonneg
    done
    # CP-APR (issue 42): counts (each value the draws that hit it), its
    # log-likelihoods compared as the fits; the reals of gen4 as counts'
    # stand-in (--allow-noninteger); a KKT tolerance that the later modes
    # meet early, so that the processes must stop each mode together.
    run "$AMPED_GEN" -o "$T/gen3c.bin" --nnz 300000 --dims 4000,3000,2000 --seed 5 --values ones
    prep gen3c "$T/gen3c.bin" --shards 16
    for mem in resident stream; do
        compare "random 3 modes, counts" "$T/gen3c.amp" cp-apr "$mem" -r 8 --iters 4
        compare "random 4 modes" "$T/gen4.amp" cp-apr "$mem" -r 6 --iters 4 --allow-noninteger
    done
    # (its own file name: compare keeps the CPU's fits by file and method)
    cp "$T/gen3c.amp" "$T/gen3t.amp"
    compare "random 3 modes, counts, tol 1e-2" "$T/gen3t.amp" cp-apr resident -r 8 --iters 6 \
        --inner 20 --tol 1e-2
    run mpi 2 "$AMPED_RUN" --gpus 1 --method cp-apr -r 4 --iters 2 "$T/gen3.amp"
    check_status "cp-apr under mpirun on GPUs, values not counts: refused" 1
    check_contains "... naming the nonzero" "$RUN_ERR" "not a count"
    n_real=0
    constrained="ao-admm mu hals"
    for tns in "$AMP_TEST_DATA"/*.tns; do
        test -f "$tns" || continue
        name=$(basename "$tns" .tns)
        prep "$name" "$tns" --shards 16
        # every tensor ALS, and one constrained method each in turn
        m=${constrained%% *}
        constrained="${constrained#* } $m"
        for mem in resident stream; do
            compare "$name" "$T/$name.amp" als "$mem" -r 8 --iters 5
            compare "$name" "$T/$name.amp" "$m" "$mem" -r 8 --iters 4 --constraint nonneg
        done
        n_real=$((n_real + 1))
    done
    test "$n_real" -gt 0 || fail "the tensors of AMP_TEST_DATA=$AMP_TEST_DATA (none found)"

    # One process of 2 GPUs under mpirun; the parts' cuts across processes.
    run "$AMPED_RUN" -q --gpus 2 --exchange nccl -t 4 -r 8 --iters 6 --tol 0 --json "$T/p1.json" "$T/gen3.amp"
    run mpi 1 "$AMPED_RUN" -q --gpus 2 -t 4 -r 8 --iters 6 --tol 0 --json "$T/p2.json" "$T/gen3.amp"
    check_status "mpirun -np 1 --gpus 2 exits 0" 0
    fits "$T/p1.json" >"$T/p1.f"
    fits "$T/p2.json" >"$T/p2.f"
    within "mpirun -np 1 --gpus 2: the fits of --gpus 2" "$(max_diff "$T/p1.f" "$T/p2.f")" 1e-9
    run "$AMPED_RUN" -q --gpus 2 --exchange nccl --send-parts 4 -t 4 -r 8 --iters 6 --tol 0 --json "$T/s1.json" "$T/gen3.amp"
    run mpi 2 "$AMPED_RUN" --gpus 1 --send-parts 4 -t 4 -r 8 --iters 6 --tol 0 --json "$T/s2.json" "$T/gen3.amp"
    check_status "2 processes, --send-parts 4: exit 0" 0
    fits "$T/s1.json" >"$T/s1.f"
    fits "$T/s2.json" >"$T/s2.f"
    within "2 processes, --send-parts 4: the fits of 1 process" "$(max_diff "$T/s1.f" "$T/s2.f")" 1e-9
    check_contains "2 processes, --send-parts 4: sent in parts" "$RUN_OUT" "in 4 parts"

    run "$AMPED_RUN" -q --gpus 2 --exchange nccl --overlap -t 4 -r 8 --iters 6 --tol 0 --json "$T/o1.json" "$T/gen3.amp"
    run mpi 2 "$AMPED_RUN" -q --gpus 1 --overlap -t 4 -r 8 --iters 6 --tol 0 --json "$T/o2.json" \
        "$T/gen3.amp"
    check_status "2 processes, --overlap: exit 0" 0
    fits "$T/o1.json" >"$T/o1.f"
    fits "$T/o2.json" >"$T/o2.f"
    within "2 processes, --overlap: the fits of 1 process" "$(max_diff "$T/o1.f" "$T/o2.f")" 1e-9

    run mpi 2 "$AMPED_RUN" --gpus 1 --partition equal-nnz -r 4 --iters 2 "$T/gen3.amp"
    check_status "--partition equal-nnz under mpirun: refused" 1
    check_contains "--partition equal-nnz under mpirun: says why" "$RUN_ERR" "equal-nnz"
}

# ---- failures -------------------------------------------------------------
check_failures() {
    leftovers() {
        ls -d "$1"* "$T"/.*tmp* 2>/dev/null
    }

    # job_fails LABEL SCRIPT: two processes of SCRIPT end the job, non-zero,
    # within 30 s (not by the test's own time limit).
    job_fails() {
        _start=$(date +%s)
        run mpi 2 sh "$2"
        _took=$(($(date +%s) - _start))
        if test "$RUN_RC" -ne 0 && test "$RUN_RC" -ne 124 && test "$_took" -le 30; then
            pass "$1: the job ends ($RUN_RC) in ${_took} s"
        else
            fail "$1: exit $RUN_RC after ${_took} s"
            diag_run
        fi
    }

    # Process 1's GPU too small for its part: refused before any collective,
    # every process stops, process 1 names itself, its host and its GPU.
    cat >"$T/cap.sh" <<EOF
#!/bin/sh
rank=\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}
if test "\$rank" = 1; then cap="--device-memory 1M"; else cap=; fi
exec "$AMPED_RUN" --gpus 1 \$cap -r 8 --iters 5 -o "$T/small" --json "$T/small.json" "$T/gen3.amp"
EOF
    job_fails "process 1 short of GPU memory" "$T/cap.sh"
    check_contains "process 1 names itself and its host" "$RUN_ERR" "process 1 of 2 (host "
    check_contains "and its GPU" "$RUN_ERR" "GPU 1 ("
    check_contains "process 0 names process 1" "$RUN_ERR" "process 1 (host "
    is "no output file" "$(leftovers "$T/small")" ""

    # Both processes shown the same one GPU (CUDA_VISIBLE_DEVICES=0 for each):
    # each takes all it sees, the same device; refused at the join, before
    # NCCL, naming both processes and the GPU's UUID.
    cat >"$T/one-gpu.sh" <<EOF
#!/bin/sh
CUDA_VISIBLE_DEVICES=0 exec "$AMPED_RUN" --gpus 1 -r 8 --iters 5 -o "$T/same" "$T/gen3.amp"
EOF
    job_fails "two processes shown the same GPU" "$T/one-gpu.sh"
    check_contains "... naming both and the GPU" "$RUN_ERR" "process 0 and process 1 both take the GPU GPU-"
    is "... no output file" "$(leftovers "$T/same")" ""

    # Process 1 killed mid-run: the launcher must end the job within seconds.
    cat >"$T/long.sh" <<EOF
#!/bin/sh
rank=\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}
echo \$\$ >"$T/pid.\$rank"
exec "$AMPED_RUN" --gpus 1 -r 16 --iters 1000000 --tol 0 -o "$T/killed" --json "$T/killed.json" "$T/gen3.amp"
EOF
    mpi 2 sh "$T/long.sh" >"$T/long.out" 2>"$T/long.err" &
    job=$!
    waited=0
    while ! grep -q '^ *20 ' "$T/long.out" 2>/dev/null && test "$waited" -lt 90; do
        sleep 1
        waited=$((waited + 1))
    done
    if test -s "$T/pid.1" && grep -q '^ *20 ' "$T/long.out"; then
        kill -9 "$(cat "$T/pid.1")"
        start=$(date +%s)
        wait "$job"
        rc=$?
        took=$(($(date +%s) - start))
        if test "$rc" -ne 0 && test "$took" -le 20; then
            pass "process 1 killed mid-run on its GPU: the job ends ($rc) in ${took} s"
        else
            fail "process 1 killed mid-run: exit $rc after ${took} s (non-zero within 20 s wanted)"
            diag_file stderr "$T/long.err"
        fi
        is "no output file" "$(leftovers "$T/killed")" ""
    else
        kill "$job" 2>/dev/null
        wait "$job"
        fail "process 1 killed mid-run: the run never reached iteration 20"
        diag_file stdout "$T/long.out"
        diag_file stderr "$T/long.err"
    fi
}

# AMP_TIME_ONLY: the timing alone, for a tensor whose checks ran before
# (the billion-scale one, where each run costs a minute).
if test -z "${AMP_TIME_ONLY:-}"; then
    check_fits
    check_failures
elif test -z "${AMP_TENSOR:-}"; then
    fail "AMP_TIME_ONLY=1 without AMP_TENSOR: nothing to time, nothing checked"
fi

# ---- time -------------------------------------------------------------------
# mean seconds an iteration, the first left out (it connects NCCL's
# peers); "nan" where there is none, or one that is not a number (null, or
# a layout the pattern does not match), which would count as 0 s.
per_iter() {
    sed -n 's/.*{"iter": \([0-9]*\), .*"seconds": \([^,}]*\).*/\1 \2/p' "$1" |
        awk "$AWK_NUM"' $1 > 1 { if (!num($2)) bad = 1; s += $2; n++ }
            END { if (n && !bad) printf "%.4f", s / n; else print "nan" }'
}

# timed LABEL CMD...: the run's time an iteration, and its rows of times
timed() {
    _l=$1
    shift
    rm -f "$T/time.json"   # a failed run must not leave the last one's to read
    run "$@"
    if test "$RUN_RC" -ne 0; then
        fail "$_l: exit 0"
        diag_run
        return
    fi
    echo "# $_l: $(per_iter "$T/time.json") s an iteration"
    sed -n 's/^  *[0-9]*  *[^ ]*  *gpu .*/#   &/p; s/^time:.*/#   &/p; s/^ *nccl.*/#   &/p' "$RUN_OUT"
}

case ${AMP_TENSOR:-} in
"") skip "timing" "AMP_TENSOR is not set" ;;
*)
    case $AMP_TENSOR in
    rd100m-like)
        nnz=${AMP_TIME_NNZ:-30000000}
        run "$AMPED_GEN" -o "$T/big.bin" --nnz "$nnz" --dims 8211298,176962,8116559 \
            --exponent 1.2 --seed 1
        check_status "an rd100m-like tensor of $nnz draws" 0
        prep big "$T/big.bin"
        rm -f "$T/big.bin"
        big=$T/big.amp
        ;;
    *.amp) big=$AMP_TENSOR ;;
    *)
        prep big "$AMP_TENSOR"
        big=$T/big.amp
        ;;
    esac
    set -- -r 32 --iters 10 --tol 0 --json "$T/time.json" "$big"
    # Both by NCCL, whole, which is all processes can do: one process's
    # default (copies in 2 parts, where peer access allows) is faster.
    timed "1 process x 2 GPUs" "$AMPED_RUN" --gpus 2 --exchange nccl "$@"
    one=$(per_iter "$T/time.json")
    timed "2 processes x 1 GPU" mpi 2 "$AMPED_RUN" --gpus 1 "$@"
    two=$(per_iter "$T/time.json")
    # A time that could not be read is "nan", which must fail, not compare
    # (so must 0 s: a run whose times are not kept).
    if is_number "$one" && is_number "$two" &&
        awk -v a="$one" -v b="$two" 'BEGIN { exit !(a > 0 && b > 0 && b <= 1.05 * a) }'; then
        pass "2 processes x 1 GPU within 5% of 1 process x 2 GPUs a iteration ($two, $one s)"
    else
        fail "2 processes x 1 GPU: $two s an iteration, 1 process x 2 GPUs $one s (5% allowed)"
    fi
    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
    export NCCL_P2P_DISABLE NCCL_SHM_DISABLE
    timed "1 process x 2 GPUs, NCCL's network transport" "$AMPED_RUN" --gpus 2 --exchange nccl "$@"
    timed "2 processes x 1 GPU, NCCL's network transport" mpi 2 "$AMPED_RUN" --gpus 1 "$@"
    unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE
    ;;
esac

echo "# $(($(date +%s) - start_all)) s in all"
done_testing
