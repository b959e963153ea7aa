#!/bin/sh
# What a user meets when a GPU fails mid-run or its memory is taken, end to
# end through amped-run (issue 27; CP-APR's loop too, issue 42):
# tests/amped-run-hooks, amped-run built
# for make check with its test hooks (AMPED_TEST_FAIL_GPU,
# AMPED_TEST_RESIDENT_FULL: run/amped-run.c), which the installed
# amped-run does not read. Without a GPU only the hooks' own checks run;
# the GPU faults need one GPU (memory taken) or two (a GPU failing).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

HOOKS=$top_builddir/tests/amped-run-hooks
need_program "$AMPED_PREP" "$AMPED_RUN" "$HOOKS"
SAMPLE=$top_srcdir/data/sample.tns.zst

run "$AMPED_PREP" -q -o "$T/sample.amp" "$SAMPLE"
check_status "the bundled sample prepares" 0

# ---- the hooks themselves, on any machine ---------------------------------------
run env AMPED_TEST_FAIL_GPU=1 "$HOOKS" --gpus 0 -r 2 --iters 1 "$T/sample.amp"
check_status "the test build: a malformed AMPED_TEST_FAIL_GPU is a usage error" 2
check_contains "... saying what to give" "$RUN_ERR" "give GPU:ITERATION"
run env AMPED_TEST_RESIDENT_FULL=x "$HOOKS" --gpus 0 -r 2 --iters 1 "$T/sample.amp"
check_status "the test build: a malformed AMPED_TEST_RESIDENT_FULL is a usage error" 2
run env AMPED_TEST_FAIL_GPU=1 AMPED_TEST_RESIDENT_FULL=x "$AMPED_RUN" --gpus 0 -r 2 --iters 1 \
    "$T/sample.amp"
check_status "the installed amped-run reads neither variable" 0

run "$AMPED_RUN" --gpus 0 -r 4 --iters 8 --tol 0 "$T/sample.amp"
check_status "the CPU run to compare with: exit 0" 0
cpu_fit=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")

if ! "$AMPED_RUN" --list-devices >/dev/null 2>&1; then
    skip "a GPU's memory taken, a GPU failing mid-run" "no GPU"
    done_testing
fi
ngpus=$("$AMPED_RUN" --list-devices | grep -c '^GPU ')

# leftovers PREFIX: every file in $T whose name starts with PREFIX
# (outputs, their temporary files), one a line.
leftovers() {
    (cd "$T" && ls -a | grep "^$1" || true)
}

# ---- the resident tensor's memory taken after the plan ----------------------------
# --memory auto streams the part instead, says so and reaches the CPU's fit;
# forced resident stops, naming the GPU, what it needs and what is free.
run env AMPED_TEST_RESIDENT_FULL=0 "$HOOKS" --gpus 1 -r 4 --iters 8 --tol 0 \
    -o "$T/auto" "$T/sample.amp"
check_status "GPU 0's memory taken, --memory auto: exit 0" 0
check_contains "... a warning naming the GPU" "$RUN_ERR" "amped-run: warning: GPU 0 ("
check_contains "... saying it streamed instead" "$RUN_ERR" \
    "ran out of memory taking the tensor resident"
check_contains "... from host memory" "$RUN_ERR" "streamed from host memory instead"
check_contains "... which the header says too" "$RUN_OUT" "tensor streamed from pinned host memory"
auto_fit=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")
check_close "... with the CPU's fit ($auto_fit, $cpu_fit)" "$auto_fit" "$cpu_fit"
check "... and its factors written" test -s "$T/auto.mode1.mat"

run env AMPED_TEST_RESIDENT_FULL=0 "$HOOKS" --gpus 1 --memory resident -r 4 --iters 8 \
    -o "$T/forced.f" --json "$T/forced.json" "$T/sample.amp"
check_status "GPU 0's memory taken, --memory resident: exit 1" 1
check_contains "... naming the GPU" "$RUN_ERR" "GPU 0 ("
check_contains "... what it needs" "$RUN_ERR" "needs"
check_contains "... and what is free" "$RUN_ERR" "is free now"
check_contains "... and that auto would stream" "$RUN_ERR" "--memory auto streams it instead"
is "... and leaves no output" "$(leftovers forced.)" ""

# ---- one GPU of two failing mid-run --------------------------------------------------
if [ "$ngpus" -lt 2 ]; then
    skip "two GPUs: GPU 1 failing at iteration 3, and its memory taken" "fewer than two GPUs"
    done_testing
fi

run env AMPED_TEST_RESIDENT_FULL=1 "$HOOKS" --gpus 2 -r 4 --iters 8 --tol 0 "$T/sample.amp"
check_status "2 GPUs, GPU 1's memory taken: exit 0" 0
check_contains "... a warning naming GPU 1" "$RUN_ERR" "amped-run: warning: GPU 1 ("
two_fit=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")
check_close "... with the CPU's fit ($two_fit, $cpu_fit)" "$two_fit" "$cpu_fit"

# A hang is stopped by timeout(1) where there is one (status 124 fails the
# exit check); the time is checked against 10 s either way.
LIMIT=
command -v timeout >/dev/null 2>&1 && LIMIT="timeout 120"
n=0
for v in "" "--exchange nccl" "--memory stream --stream-chunk 4099" "--partition equal-nnz" \
         "--exchange copy --send-parts 1" "--method cp-apr --exchange nccl" \
         "--method cp-apr --exchange copy --memory stream --stream-chunk 4099"; do
    n=$((n + 1))
    name=fail$n.
    t0=$(date +%s.%N)
    run env AMPED_TEST_FAIL_GPU=1:3 $LIMIT "$HOOKS" --gpus 2 $v -r 4 --iters 50 --tol 0 \
        -o "$T/${name}f" --json "$T/${name}json" --report "$T/${name}html" "$T/sample.amp"
    t1=$(date +%s.%N)
    took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    check_status "2 GPUs${v:+, $v}, GPU 1 failing at iteration 3: exit 1" 1
    check_contains "... a message naming GPU 1" "$RUN_ERR" "GPU 1 of the run"
    check_contains "... and the iteration" "$RUN_ERR" "iteration 3"
    check "... within 10 s (took $took)" awk -v s="$took" 'BEGIN { exit !(s < 10) }'
    is "... no output file, nor a temporary one" "$(leftovers "$name")" ""
done

done_testing
