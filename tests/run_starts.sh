#!/bin/sh
# amped-run --starts and --ranks (issue 44) end to end, checked by
# tests/starts_check.py with NumPy: on a planted rank-5 tensor (40 x 30 x 20,
# sparse factors, 1% noise) the sweep over ranks 2..8 with 5 starts fitted
# together; each model checked against the same model run alone (same rank
# and seed) to 1e-12 in fit after every iteration, among them models that
# run on after others of the batch stopped (so one that stops leaves the
# rest unchanged); the constrained methods (hals, ao-admm) and f32 the same
# way; FMS against an exhaustive one computed here from the factor files,
# and 1 for a model against itself permuted and scaled; FMS near 1 at rank
# 5 and lower above it; --choose fms 0.95 and fit-elbow name rank 5; the
# files -o writes with and without --keep-all; --report's chart of fit and
# FMS against rank against the JSON (tests/report_check.py starts); the
# options at their edges.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_program "$AMPED_PREP" "$AMPED_RUN"
PY=${AMP_TEST_PYTHON:-python3}
CHECK="$top_srcdir/tests/starts_check.py"
if ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
    if test "${CI:-}" = true; then
        echo "Bail out! no NumPy in $PY (CI=true needs it: .ci/run sets AMP_TEST_PYTHON)"
        exit 1
    fi
    skip_all "no NumPy in $PY (AMP_TEST_PYTHON names a python that has it)"
fi

py_check() {   # description, starts_check.py arguments...
    _what=$1
    shift
    if "$PY" "$CHECK" "$@" >"$T/py.out" 2>&1; then
        pass "$_what: $(tail -n 1 "$T/py.out")"
    else
        fail "$_what"
        sed 's/^/# /' "$T/py.out"
    fi
}

"$PY" "$CHECK" planted "$T/p.tns" 3 >"$T/planted.out" 2>&1 ||
    { cat "$T/planted.out"; echo "Bail out! starts_check.py planted failed"; exit 1; }
run "$AMPED_PREP" -q -o "$T/p.amp" "$T/p.tns"
check_status "a planted rank-5 tensor ($(cat "$T/planted.out")) prepares" 0

# ---- the sweep -----------------------------------------------------------
ITER="--iters 200 --tol 1e-9 -t 2"
# shellcheck disable=SC2086
run "$AMPED_RUN" $ITER --ranks 8,2,3,4,5,6,7 --starts 5 --choose fms 0.95 \
    --json "$T/sweep.json" --report "$T/sweep.html" -o "$T/m" --format npy --keep-all \
    "$T/p.amp"
check_status "--ranks 2..8 --starts 5: exit 0" 0
report_check() {   # description, report_check.py arguments...
    _what=$1
    shift
    if "$PY" "$top_srcdir/tests/report_check.py" "$@" >"$T/rc.out" 2>&1; then
        pass "$_what"
    else
        fail "$_what"
        sed 's/^/# /' "$T/rc.out"
    fi
}
report_check "--report: fit and FMS against rank = the JSON's models' (recomputed)" \
    starts "$T/sweep.html" "$T/sweep.json"
check_contains "the header counts the models and columns" "$RUN_OUT" \
    "35 models (5 starts, seed 1 on; ranks 2,3,4,5,6,7,8), cp-als, 175 columns side by side"
check_contains "the table's header" "$RUN_OUT" \
    "  rank  best fit      seed  worst fit     spread     FMS min  FMS median  iters (best)"
check_contains "one pass" "$RUN_OUT" "35 models in 1 pass of batched MTTKRPs"
check_contains "--choose fms 0.95 names rank 5" "$RUN_OUT" "recommended rank: 5 (the largest rank"
py_check "the JSON names rank 5 with its reason" choose "$T/sweep.json" 5
py_check "FMS near 1 at rank 5, lower above it" planted-fms "$T/sweep.json" 5 0.99
for r in 5 7; do
    py_check "rank $r: FMS of each start = the exhaustive one (1e-12)" \
        fms "$T/sweep.json" "$T/m" $r 1,2,3,4,5 1e-12
done
missing=
for r in 2 3 4 5 6 7 8; do
    for f in "$T/m.r$r.mode3.npy" "$T/m.r$r.lambda.npy" "$T/m.r$r.s5.mode1.npy"; do
        test -f "$f" || missing="$missing $f"
    done
done
is "-o --keep-all: PREFIX.rR.* (the best) and PREFIX.rR.sS.* for every rank" "$missing" ""
iters=$("$PY" -c 'import json, sys
its = [m["iters"] for m in json.load(open(sys.argv[1]))["models"]]
print(min(its) < max(its), len(its))' "$T/sweep.json")
is "models stop at different iterations (a stopped one drops out)" "$iters" "True 35"

# Each model of the batch is the model alone: some stopped early, others
# ran on after them.
for rs in "2 1" "5 3" "6 2" "7 2" "8 5"; do
    set -- $rs
    # shellcheck disable=SC2086
    run "$AMPED_RUN" -q $ITER -r "$1" --seed "$2" --json "$T/solo.json" "$T/p.amp"
    py_check "rank $1, seed $2: batched = alone after every iteration (1e-12)" \
        solo "$T/sweep.json" "$1" "$2" "$T/solo.json" 1e-12
done

# The constrained methods and f32 batch the same way.
while read -r name opts; do
    # shellcheck disable=SC2086
    run "$AMPED_RUN" -q $ITER $opts --ranks 3,5 --starts 2 --json "$T/b.json" "$T/p.amp"
    check_status "$name: --ranks 3,5 --starts 2: exit 0" 0
    # shellcheck disable=SC2086
    run "$AMPED_RUN" -q $ITER $opts -r 5 --seed 2 --json "$T/solo.json" "$T/p.amp"
    py_check "$name: rank 5, seed 2: batched = alone (1e-12)" \
        solo "$T/b.json" 5 2 "$T/solo.json" 1e-12
done <<'EOF'
hals --method hals --constraint nonneg --iters 30
ao-admm --method ao-admm --constraint nonneg --iters 30
mu --method mu --iters 30
f32 --precision f32
EOF

# --starts alone takes --rank; without --keep-all only the best is written.
# shellcheck disable=SC2086
run "$AMPED_RUN" $ITER -r 4 --starts 3 --choose fms=0.5 -o "$T/k" "$T/p.amp"
check_status "--starts 3 -r 4 --choose fms=0.5: exit 0" 0
check_contains "the table has rank 4" "$RUN_OUT" "     4  0."
is "-o without --keep-all: the best start only" \
    "$(cd "$T" && ls k.* | tr '\n' ' ')" \
    "k.r4.lambda.mat k.r4.manifest k.r4.mode1.mat k.r4.mode2.mat k.r4.mode3.mat "
# shellcheck disable=SC2086
run "$AMPED_RUN" -q $ITER --ranks 2,3,4,5,6,7,8 --choose fit-elbow --json "$T/e.json" \
    --report "$T/e.html" "$T/p.amp"
py_check "--choose fit-elbow names rank 5" choose "$T/e.json" 5
report_check "--report with one start: fit against rank, no FMS" starts "$T/e.html" "$T/e.json"

# ---- the options at their edges ----------------------------------------
while IFS='|' read -r args status msg; do
    # shellcheck disable=SC2086
    run "$AMPED_RUN" -q --iters 2 $args "$T/p.amp"
    check_status "$args: exit $status" "$status"
    check_contains "$args: says why" "$RUN_ERR" "$msg"
done <<'EOF'
--starts 0|2|invalid value '0' for --starts
--ranks 3,0|2|--ranks
--ranks 3,3|2|--ranks names rank 3 twice
-r 3 --ranks 4,5|2|--rank and --ranks: give one
--starts 2 --keep-all|2|--keep-all says which models -o writes: give -o PREFIX
--keep-all -o x|2|--keep-all keeps every start of --starts or --ranks
--choose fms 0.9|2|--choose picks a rank among --ranks
--starts 2 --choose best|2|--choose takes fit-elbow or fms F
--starts 2 --choose fms 1.5|2|--choose fms
--starts 3 --choose fit-elbow|2|--choose fit-elbow compares ranks
--ranks 3,4 --choose fms 0.9|2|--choose fms compares starts: give --starts 2 or more
--starts 2 --method cp-apr|2|--starts and --ranks batch --method als, ao-admm, mu and hals; not --method cp-apr
--starts 2 --method gcp|2|not --method gcp
--starts 2 --gpus 2|2|--starts and --ranks run on the CPU or one GPU for now, and --gpus asks for 2
--starts 2 --memory stream|2|--starts and --ranks run on the CPU unless --gpus 1 asks for the GPU: --memory is the GPU's
--ranks 4,600 --gpus 1|2|every rank within the GPU kernels' 512
--starts 2 --init x|2|not --init
--starts 2 --check|2|--mttkrp-only and --check fit none
--starts 2 -o x --rows nonempty|2|--starts and --ranks write every row
EOF
done_testing
