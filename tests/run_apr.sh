#!/bin/sh
# Poisson CP (--method cp-apr, issue 42) end to end, read back by
# tests/apr_check.py with NumPy: on a tensor of counts drawn from a planted
# rank-5 model, the model is recovered (factor match score at least 0.95),
# the run meets its KKT tolerance, and the log-likelihood the JSON reports
# is the one recomputed from the factor files; from the same start as
# pyttb's cp_apr (its shift rule, --kappa-rule pyttb), the log-likelihood
# after every outer iteration is pyttb's to 1e-9, on the planted tensor and
# on splatt-med (a real tensor of counts); a tensor whose fit has model
# values below the Toolbox's floor, -inf with that floor as in pyttb and
# finite with the default; the same bits on 1 and 2
# threads; on one GPU (resident, streamed, from compressed chunks; f64 and
# f32), every outer iteration's log-likelihood the CPU's from the same
# start (skipped without a GPU); values that are not counts refused by
# their coordinates; the options at their edges.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_program "$AMPED_PREP" "$AMPED_RUN"
need_real_data
PY=${AMP_TEST_PYTHON:-python3}
CHECK="$top_srcdir/tests/apr_check.py"
if ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
    if test "${CI:-}" = true; then
        echo "Bail out! no NumPy in $PY (CI=true needs it: .ci/run sets AMP_TEST_PYTHON)"
        exit 1
    fi
    skip_all "no NumPy in $PY (AMP_TEST_PYTHON names a python that has it)"
fi
have_pyttb=yes
"$PY" -c 'import pyttb' >/dev/null 2>&1 || have_pyttb=
if test -z "$have_pyttb" && test "${CI:-}" = true; then
    echo "Bail out! no pyttb in $PY (CI=true needs it: .ci/run sets AMP_TEST_PYTHON)"
    exit 1
fi

# A check by apr_check.py: its last line as the test's, its output on failure.
py_check() {   # description, apr_check.py arguments...
    _what=$1
    shift
    if "$PY" "$CHECK" "$@" >"$T/py.out" 2>&1; then
        pass "$_what: $(tail -n 1 "$T/py.out")"
    else
        fail "$_what"
        sed 's/^/# /' "$T/py.out"
    fi
}

# ---- a planted model ----------------------------------------------------
"$PY" "$CHECK" planted "$T/p.tns" "$T/truth" 5 >"$T/planted.out" 2>&1 ||
    { cat "$T/planted.out"; echo "Bail out! apr_check.py planted failed"; exit 1; }
run "$AMPED_PREP" -q -o "$T/p.amp" "$T/p.tns"
check_status "a planted Poisson tensor ($(cat "$T/planted.out")) prepares" 0

run "$AMPED_RUN" --method cp-apr -r 5 --gpus 0 --seed 3 --iters 400 -o "$T/est" \
    --format npy --json "$T/est.json" "$T/p.amp"
check_status "cp-apr, rank 5, on the CPU: exit 0" 0
check_contains "the header says Poisson and the KKT rule" "$RUN_OUT" "Poisson; at most 10 inner"
check_contains "the iteration lines' header" "$RUN_OUT" "iter  loglik             kkt        inner"
check_contains "it meets the KKT tolerance (1e-4, the default)" "$RUN_OUT" "(converged), KKT violation"
py_check "the model is recovered" fms "$T/truth" "$T/est" 0.95
py_check "the JSON's log-likelihood is the factor files' recomputed" \
    loglik "$T/p.tns" "$T/est" "$T/est.json"
last=$("$PY" -c 'import json, sys
j = json.load(open(sys.argv[1]))
it = j["iterations"][-1]
print(it["inner"], it["kkt"] < j["tol"], j["tol"], j["max_iters"], j["kappa_rule"], j["inner"])' "$T/est.json")
is "converged: every mode met the tolerance at its first inner iteration; the defaults" \
    "$last" "3 True 0.0001 400 kkt 10"

# The same bits for any thread count.
run "$AMPED_RUN" --method cp-apr -r 5 --gpus 0 --seed 3 --iters 30 -t 1 -o "$T/t1" \
    --format npy "$T/p.amp"
sed -n 's/^ *\([0-9]*  -[0-9].*\)  *[0-9.]*$/\1/p' "$RUN_OUT" >"$T/t1.lines"
run "$AMPED_RUN" --method cp-apr -r 5 --gpus 0 --seed 3 --iters 30 -t 2 -o "$T/t2" \
    --format npy "$T/p.amp"
sed -n 's/^ *\([0-9]*  -[0-9].*\)  *[0-9.]*$/\1/p' "$RUN_OUT" >"$T/t2.lines"
check "1 and 2 threads: the same log-likelihood, KKT and inner iterations at every iteration" \
    cmp -s "$T/t1.lines" "$T/t2.lines"
same=yes
for f in mode1 mode2 mode3 lambda; do
    cmp -s "$T/t1.$f.npy" "$T/t2.$f.npy" || same=
done
is "1 and 2 threads: the same factor files, byte for byte" "$same" yes
test -s "$T/t1.lines" || fail "no iteration lines read"

# ---- against pyttb, from the same start --------------------------------
if test -n "$have_pyttb"; then
    "$PY" "$CHECK" init "$T/i5" 5 11 "$T/p.tns"
    run "$AMPED_RUN" -q --method cp-apr -r 5 --gpus 0 --init "$T/i5" --iters 6 \
        --kappa-rule pyttb --json "$T/py.json" "$T/p.amp"
    check_status "the planted tensor from a given start, pyttb's shift rule" 0
    py_check "planted: every outer iteration's log-likelihood is pyttb's" \
        pyttb "$T/p.tns" "$T/i5" 5 "$T/py.json" 6
    SPLATT=$AMP_TEST_DATA/splatt-med.tns
    run "$AMPED_PREP" -q -o "$T/s.amp" "$SPLATT"
    "$PY" "$CHECK" init "$T/i4" 4 12 "$SPLATT"
    run "$AMPED_RUN" -q --method cp-apr -r 4 --gpus 0 --init "$T/i4" --iters 3 \
        --kappa-rule pyttb --json "$T/s.json" "$T/s.amp"
    check_status "splatt-med (counts 1 to 5) from a given start" 0
    py_check "splatt-med: every outer iteration's log-likelihood is pyttb's" \
        pyttb "$SPLATT" "$T/i4" 4 "$T/s.json" 3
else
    for what in "planted, from a given start" "planted against pyttb" \
        "splatt-med from a given start" "splatt-med against pyttb"; do
        skip "$what" "no pyttb in $PY"
    done
fi

# ---- a model value below the floor -------------------------------------
# 2500 counts of 1 at random coordinates of a 4-mode tensor (about 1500
# nonempty slices a mode), rank 5: a fit puts model values far below 1e-10
# at the nonzeros alone in their slices. With the Tensor Toolbox's floor
# (--eps-div-zero 1e-10) the update credits such a row only m / 1e-10 of
# its count at each inner iteration, the row underflows to 0 and the
# log-likelihood is -inf from outer iteration 2, in pyttb as in amped;
# with the default floor (1e-30) every outer iteration's is finite, rises,
# and is pyttb's given the same floor.
"$PY" "$CHECK" sparse "$T/sp.tns" 2500 2500 4 >"$T/sp.out" 2>&1 ||
    { cat "$T/sp.out"; echo "Bail out! apr_check.py sparse failed"; exit 1; }
run "$AMPED_PREP" -q -o "$T/sp.amp" "$T/sp.tns"
check_status "a sparse 4-mode tensor of counts ($(cat "$T/sp.out")) prepares" 0
"$PY" "$CHECK" init "$T/isp" 5 2 "$T/sp.tns"
lls() {   # the JSON's log-likelihoods: F finite, I -inf (null), then rising or not
    "$PY" -c 'import json, sys
ll = [i["loglik"] for i in json.load(open(sys.argv[1]))["iterations"]]
fin = [x for x in ll if x is not None]
print("".join("F" if x is not None else "I" for x in ll),
      "rising" if all(b > a for a, b in zip(fin, fin[1:])) else "not rising")' "$1"
}
run "$AMPED_RUN" -q --method cp-apr -r 5 --gpus 0 --init "$T/isp" --iters 4 \
    --kappa-rule pyttb --eps-div-zero 1e-10 --json "$T/sp10.json" "$T/sp.amp"
check_status "sparse, the Toolbox's floor 1e-10: exit 0" 0
is "sparse, the Toolbox's floor: finite after outer iteration 1, -inf from 2" \
    "$(lls "$T/sp10.json")" "FIII rising"
run "$AMPED_RUN" -q --method cp-apr -r 5 --gpus 0 --init "$T/isp" --iters 4 \
    --kappa-rule pyttb -o "$T/sp30" --format npy --json "$T/sp30.json" "$T/sp.amp"
check_status "sparse, the default floor: exit 0" 0
is "sparse, the default floor: every log-likelihood finite, and rising" \
    "$(lls "$T/sp30.json")" "FFFF rising"
py_check "sparse, the default floor: the JSON's log-likelihood is the factor files'" \
    loglik "$T/sp.tns" "$T/sp30" "$T/sp30.json"
run "$AMPED_RUN" -q --method cp-apr -r 5 --gpus 0 --seed 1 --iters 10 --json "$T/spk.json" \
    "$T/sp.amp"
check_status "sparse, the default floor and shift rule, a random start: exit 0" 0
is "sparse, the default floor and shift rule: every log-likelihood finite" \
    "$(lls "$T/spk.json" | cut -d' ' -f1)" "FFFFFFFFFF"
if test -n "$have_pyttb"; then
    py_check "sparse, the floor 1e-10: pyttb's log-likelihoods, -inf from iteration 2 too" \
        pyttb "$T/sp.tns" "$T/isp" 5 "$T/sp10.json" 4
    py_check "sparse, the default floor: pyttb's log-likelihoods with the same floor" \
        pyttb "$T/sp.tns" "$T/isp" 5 "$T/sp30.json" 4
    # tol 0.3 stops modes at their first inner iteration and inside them
    # (the CPU runs a row's iterations at once, and goes back where the
    # mode stopped before its last): pyttb's inner iterations and
    # log-likelihoods still.
    run "$AMPED_RUN" -q --method cp-apr -r 5 --gpus 0 --init "$T/isp" --iters 10 --tol 0.3 \
        --kappa-rule pyttb --json "$T/spt.json" "$T/sp.amp"
    check_status "sparse, tol 0.3: exit 0" 0
    is "sparse, tol 0.3: outer iterations of fewer than 4 x 10 inner, and of under 10" \
        "$("$PY" -c 'import json, sys
inner = [i["inner"] for i in json.load(open(sys.argv[1]))["iterations"]]
print(len(inner), max(inner) < 40, min(inner) < 10)' "$T/spt.json")" "10 True True"
    py_check "sparse, tol 0.3: pyttb's inner iterations and log-likelihoods" \
        pyttb "$T/sp.tns" "$T/isp" 5 "$T/spt.json" 10
    # Rows longer than the CPU keeps of one row's pi (40,000 nonzeros at
    # rank 16) take the pass that gathers at every inner iteration, and
    # the last mode's log-likelihood from gathers too.
    "$PY" "$CHECK" longrows "$T/lr.tns" 9 >"$T/lr.out" 2>&1 ||
        { cat "$T/lr.out"; echo "Bail out! apr_check.py longrows failed"; exit 1; }
    run "$AMPED_PREP" -q -o "$T/lr.amp" "$T/lr.tns"
    "$PY" "$CHECK" init "$T/ilr" 16 3 "$T/lr.tns"
    run "$AMPED_RUN" -q --method cp-apr -r 16 --gpus 0 --init "$T/ilr" --iters 2 \
        --kappa-rule pyttb --json "$T/lr.json" "$T/lr.amp"
    check_status "rows of 40,000 nonzeros ($(cat "$T/lr.out")), rank 16: exit 0" 0
    py_check "rows of 40,000 nonzeros: pyttb's inner iterations and log-likelihoods" \
        pyttb "$T/lr.tns" "$T/ilr" 16 "$T/lr.json" 2
else
    skip "sparse against pyttb, two floors and stops inside the inner iterations" "no pyttb in $PY"
    skip "rows of 40,000 nonzeros against pyttb" "no pyttb in $PY"
fi

# ---- one GPU against the CPU, from the same start -----------------------
# --tol 0 runs every inner iteration, so that a KKT violation next to the
# tolerance cannot part the two runs' paths: each outer iteration's
# log-likelihood within 1e-9 relative of the CPU's (f64; only the order of
# the sums differs), resident, streamed in chunks of 1024 nonzeros (rows
# cut between chunks) and from compressed chunks of 1000; f32 (Phi and the
# gathered rows in f32) within 1e-4, a bound set before the first GPU run.
# Then a run to convergence meets the KKT tolerance on the GPU too.
if "$AMPED_RUN" --list-devices >/dev/null 2>&1; then
    "$PY" "$CHECK" init "$T/ig" 5 21 "$T/p.tns"
    run "$AMPED_PREP" -q --chunk-nnz 1000 -o "$T/p1k.amp" "$T/p.tns"
    check_status "the planted tensor in chunks of 1000 nonzeros prepares" 0
    run "$AMPED_RUN" -q --method cp-apr -r 5 --gpus 0 --init "$T/ig" --iters 8 --tol 0 \
        --json "$T/g0.json" "$T/p.amp"
    check_status "GPU section: the CPU's run from a given start" 0
    while IFS='|' read -r what file args tol; do
        # shellcheck disable=SC2086
        run "$AMPED_RUN" -q --method cp-apr -r 5 --gpus 1 --init "$T/ig" --iters 8 --tol 0 \
            $args --json "$T/g1.json" "$T/$file"
        check_status "one GPU, $what: exit 0" 0
        py_check "one GPU, $what: every outer iteration's log-likelihood is the CPU's" \
            same "$T/g0.json" "$T/g1.json" "$tol" exact
    done <<'EOF2'
resident|p.amp|--memory resident|1e-9
streamed|p.amp|--memory stream --stream-chunk 1024|1e-9
from compressed chunks|p1k.amp|--memory compressed|1e-9
resident, f32|p.amp|--memory resident --precision f32|1e-4
streamed, f32|p.amp|--memory stream --stream-chunk 1024 --precision f32|1e-4
EOF2
    run "$AMPED_RUN" --method cp-apr -r 5 --gpus 1 --seed 3 --iters 400 --json "$T/gc.json" \
        "$T/p.amp"
    check_status "one GPU, to convergence: exit 0" 0
    check_contains "one GPU: it meets the KKT tolerance" "$RUN_OUT" "(converged), KKT violation"
    check_contains "one GPU: the backend is the GPU" "$RUN_OUT" "backend:   gpu "
    SPLATT=$AMP_TEST_DATA/splatt-med.tns
    run "$AMPED_PREP" -q -f -o "$T/s.amp" "$SPLATT"
    "$PY" "$CHECK" init "$T/is" 4 12 "$SPLATT"
    run "$AMPED_RUN" -q --method cp-apr -r 4 --gpus 0 --init "$T/is" --iters 5 --tol 0 \
        --json "$T/s0.json" "$T/s.amp"
    check_status "splatt-med on the CPU from a given start" 0
    for mem in resident stream; do
        run "$AMPED_RUN" -q --method cp-apr -r 4 --gpus 1 --memory $mem --init "$T/is" \
            --iters 5 --tol 0 --json "$T/s1.json" "$T/s.amp"
        check_status "splatt-med on one GPU, $mem: exit 0" 0
        py_check "splatt-med on one GPU, $mem: every outer iteration's log-likelihood is the CPU's" \
            same "$T/s0.json" "$T/s1.json" 1e-9 exact
    done
else
    skip "one GPU against the CPU (cp-apr)" "no CUDA device (amped-run --list-devices fails)"
fi

# ---- four modes: the pass that takes any number of modes ------------------
"$PY" "$CHECK" planted "$T/p4.tns" "$T/truth4" 6 4 >"$T/planted4.out" 2>&1 ||
    { cat "$T/planted4.out"; echo "Bail out! apr_check.py planted (4 modes) failed"; exit 1; }
run "$AMPED_PREP" -q -o "$T/p4.amp" "$T/p4.tns"
check_status "a planted 4-mode Poisson tensor ($(cat "$T/planted4.out")) prepares" 0
run "$AMPED_RUN" -q --method cp-apr -r 5 --gpus 0 --seed 3 --iters 400 -o "$T/est4" \
    --format npy --json "$T/est4.json" "$T/p4.amp"
check_status "cp-apr on 4 modes: exit 0" 0
py_check "4 modes: the model is recovered" fms "$T/truth4" "$T/est4" 0.95
py_check "4 modes: the JSON's log-likelihood is the factor files' recomputed" \
    loglik "$T/p4.tns" "$T/est4" "$T/est4.json"
if test -n "$have_pyttb"; then
    "$PY" "$CHECK" init "$T/i45" 5 13 "$T/p4.tns"
    run "$AMPED_RUN" -q --method cp-apr -r 5 --gpus 0 --init "$T/i45" --iters 4 \
        --kappa-rule pyttb --json "$T/py4.json" "$T/p4.amp"
    py_check "4 modes: every outer iteration's log-likelihood is pyttb's" \
        pyttb "$T/p4.tns" "$T/i45" 5 "$T/py4.json" 4
else
    skip "4 modes against pyttb" "no pyttb in $PY"
fi

# ---- what is not a count ----------------------------------------------
printf '1 1 1 3\n2 1 1 2.5\n1 2 1 1\n2 2 2 4\n' >"$T/frac.tns"
run "$AMPED_PREP" -q -o "$T/frac.amp" "$T/frac.tns"
run "$AMPED_RUN" --method cp-apr -r 1 --gpus 0 "$T/frac.amp"
check_status "a value of 2.5: exit 1" 1
check_contains "named by its coordinates, from 1" "$RUN_ERR" \
    "the nonzero at (2, 1, 1) has the value 2.5, not a count"
check_contains "and the option that takes it" "$RUN_ERR" "--allow-noninteger"
run "$AMPED_RUN" -q --method cp-apr -r 1 --gpus 0 --iters 5 --allow-noninteger "$T/frac.amp"
check_status "--allow-noninteger takes it" 0
printf '1 1 1 3\n2 1 1 2\n1 2 1 -1\n2 2 2 4\n' >"$T/neg.tns"
run "$AMPED_PREP" -q -o "$T/neg.amp" "$T/neg.tns"
run "$AMPED_RUN" --method cp-apr -r 1 --gpus 0 --allow-noninteger "$T/neg.amp"
check_status "a negative value, even with --allow-noninteger: exit 1" 1
check_contains "named by its coordinates" "$RUN_ERR" "the nonzero at (1, 2, 1) has the value -1"

# ---- options at their edges ----------------------------------------------
while IFS='|' read -r args status msg; do
    # shellcheck disable=SC2086
    run "$AMPED_RUN" --method cp-apr --gpus 0 $args "$T/p.amp"
    check_status "cp-apr $args: exit $status" "$status"
    check_contains "cp-apr $args: says why" "$RUN_ERR" "$msg"
done <<'EOF'
--inner 0|2|invalid value '0' for --inner
--inner 100001|2|invalid value '100001' for --inner
--kappa -1|2|invalid value '-1' for --kappa
--kappa-tol x|2|invalid value 'x' for --kappa-tol
--eps-div-zero 0|2|--eps-div-zero 0: give a positive number
--kappa-rule paper|2|invalid value 'paper' for --kappa-rule: expected one of 'kkt', 'pyttb'
--constraint nonneg|2|--method cp-apr takes no --constraint
--l1 0.1|2|--method cp-apr takes no --constraint, --l1 or --l2
--gpus 2 --partition equal-nnz --iters 2|1|--method cp-apr on 2 GPUs takes the file's shards (--partition shards), not --partition equal-nnz
--gpus 1 --memory remap --iters 2|1|--memory remap: not with --method cp-apr
EOF
# Several GPUs are no longer refused for the method: without GPUs (or
# without CUDA) the run stops for want of them, as CP-ALS's does, and the
# refusal of old is gone.
run "$AMPED_RUN" --method cp-apr -r 2 --gpus 2 --iters 2 "$T/p.amp"
ngpus=0
"$AMPED_RUN" --list-devices >/dev/null 2>&1 && ngpus=$("$AMPED_RUN" --list-devices | grep -c '^GPU ')
if test "$ngpus" -ge 2; then
    check_status "cp-apr --gpus 2 on a machine of 2 GPUs: exit 0" 0
else
    check_status "cp-apr --gpus 2 without 2 GPUs: exit 1" 1
    if test "$ngpus" = 1; then
        check_contains "... for want of GPUs" "$RUN_ERR" "--gpus 2: this machine has 1 GPU"
    else
        check_contains "... for want of GPUs" "$RUN_ERR" "--gpus 0 runs on the CPU"
    fi
fi
check_not_contains "cp-apr --gpus 2: not refused for the method" "$RUN_ERR" "one GPU for now"
run "$AMPED_RUN" -q --method cp-apr -r 2 --gpus 0 --inner 1 --iters 2 --tol 0 \
    --json "$T/i1.json" "$T/p.amp"
check_status "--inner 1 --tol 0" 0
is "one inner iteration a mode, every outer iteration run" \
    "$("$PY" -c 'import json, sys; print([i["inner"] for i in json.load(open(sys.argv[1]))["iterations"]])' "$T/i1.json")" \
    "[3, 3]"
done_testing
