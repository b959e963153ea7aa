#!/bin/sh
# CP completion (amped-run --observed nonzeros, issue 43) end to end, read
# back by tests/completion_check.py with NumPy: from the same start, every
# iteration's fit, training and test RMSE and the final factors equal a
# dense masked reference written there (1e-10), with a ridge, without one,
# with --holdout and with --holdout-file, on 3 and 4 modes; a planted
# rank-3 tensor with 90% of its cells hidden is recovered (the test RMSE on
# 2000 hidden cells below twice the noise); every number the report prints
# recomputed from the factor files; the holdout selection the same for
# other shards, chunks and thread counts; rows with no training entry
# counted; one GPU against the CPU (skipped without a GPU), and two GPUs
# (resident, streamed, rows by copies, --holdout-file: skipped without two);
# the options at their edges; equal-nnz, --overlap and --memory remap
# refused, and --gpus 2 not refused for completion (it fails here only for
# want of GPUs).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_program "$AMPED_PREP" "$AMPED_RUN"
PY=${AMP_TEST_PYTHON:-python3}
CHECK="$top_srcdir/tests/completion_check.py"
if ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
    if test "${CI:-}" = true; then
        echo "Bail out! no NumPy in $PY (CI=true needs it: .ci/run sets AMP_TEST_PYTHON)"
        exit 1
    fi
    skip_all "no NumPy in $PY (AMP_TEST_PYTHON names a python that has it)"
fi

# A check by completion_check.py: its last line as the test's, its output
# on failure.
py_check() {   # description, completion_check.py arguments...
    _what=$1
    shift
    if "$PY" "$CHECK" "$@" >"$T/py.out" 2>&1; then
        pass "$_what: $(tail -n 1 "$T/py.out")"
    else
        fail "$_what"
        sed 's/^/# /' "$T/py.out"
    fi
}

# ---- the dense masked reference, from the same start ----------------------
"$PY" "$CHECK" random "$T/r3.tns" 9,7,6 300 1 &&
    "$PY" "$CHECK" random "$T/r4.tns" 6,5,4,3 150 2 &&
    "$PY" "$CHECK" init "$T/i3" 3 11 "$T/r3.tns" &&
    "$PY" "$CHECK" init "$T/i4" 4 12 "$T/r4.tns" ||
    { echo "Bail out! completion_check.py could not write its tensors"; exit 1; }
run "$AMPED_PREP" -q -o "$T/r3.amp" "$T/r3.tns"
check_status "a random 3-mode tensor prepares" 0
run "$AMPED_PREP" -q -o "$T/r4.amp" "$T/r4.tns"
check_status "a random 4-mode tensor prepares" 0
# Test entries of the 3-mode tensor's cells, stored or not: any cell.
printf '1 1 1 0.5\n9 7 6 -0.25\n2 3 4 1.5\n5 5 5 0\n' >"$T/t3.tns"

while IFS='|' read -r what n args l2 test; do
    # shellcheck disable=SC2086
    run "$AMPED_RUN" -q --gpus 0 --observed nonzeros -r "$((n))" --init "$T/i$n" --iters 8 \
        --tol 0 $args --json "$T/ref.json" -o "$T/ref" --format npy "$T/r$n.amp"
    check_status "$what: exit 0" 0
    # shellcheck disable=SC2086
    py_check "$what: the dense masked reference's iterates" \
        reference "$T/r$n.tns" "$T/i$n" "$T/ref.json" "$T/ref" "$l2" $test
    # shellcheck disable=SC2086
    py_check "$what: the report recomputed from the factor files" \
        recompute "$T/r$n.tns" "$T/ref" "$T/ref.json" $test
done <<EOF
3 modes, no ridge, no test entries|3||0|none
3 modes, ridge 0.05, holdout 0.25|3|--l2 0.05 --holdout 0.25 --seed 4|0.05|holdout 0.25 4
3 modes, ridge 0.01, test entries from a file|3|--l2 0.01 --holdout-file $T/t3.tns|0.01|file $T/t3.tns
4 modes, ridge 0.1, holdout 0.3|4|--l2 0.1 --holdout 0.3 --seed 9|0.1|holdout 0.3 9
4 modes, 3 threads, 1 thread of OpenMP's|4|--l2 0.1 --holdout 0.3 --seed 9 -t 3|0.1|holdout 0.3 9
EOF

# Long rows (more than 2 x 4096 nonzeros) are built in pieces by every
# thread and summed in piece order: mode 1's rows of a 3 x 100 x 100
# tensor with 26000 stored entries, against the reference, and the same
# bits on 1 and 2 threads.
"$PY" "$CHECK" random "$T/long.tns" 3,100,100 26000 4 &&
    "$PY" "$CHECK" init "$T/il" 3 13 "$T/long.tns" ||
    { echo "Bail out! completion_check.py could not write the long rows' tensor"; exit 1; }
run "$AMPED_PREP" -q -o "$T/long.amp" "$T/long.tns"
check_status "a tensor of long rows prepares" 0
for t in 1 2; do
    run "$AMPED_RUN" -q --gpus 0 --observed nonzeros -r 3 --init "$T/il" --iters 4 --tol 0 \
        --l2 0.01 --holdout 0.1 --seed 6 -t "$t" --json "$T/long$t.json" -o "$T/long$t" \
        --format npy "$T/long.amp"
    check_status "long rows, $t thread(s): exit 0" 0
done
py_check "long rows (in pieces): the dense masked reference's iterates" \
    reference "$T/long.tns" "$T/il" "$T/long2.json" "$T/long2" 0.01 holdout 0.1 6
check "long rows: 1 and 2 threads write the same factors, byte for byte" \
    sh -c 'for f in mode1 mode2 mode3 lambda; do cmp -s "$1.$f.npy" "$2.$f.npy" || exit 1; done' \
    sh "$T/long1" "$T/long2"

# Rows with no training entry: most of the small tensor held out. The
# reference keeps them as amped-run does, and the report counts them.
"$PY" "$CHECK" init "$T/i3" 2 11 "$T/r3.tns"
run "$AMPED_RUN" -q --gpus 0 --observed nonzeros -r 2 --init "$T/i3" --iters 4 --tol 0 \
    --l2 0.1 --holdout 0.97 --seed 2 --json "$T/un.json" -o "$T/un" --format npy \
    "$T/r3.amp"
check_status "holdout 0.97: exit 0" 0
un=$("$PY" -c 'import json, sys
print(sum(json.load(open(sys.argv[1]))["completion"]["unobserved_rows"]))' "$T/un.json")
check "holdout 0.97: some rows have no training entry ($un)" test "${un:-0}" -gt 0
py_check "holdout 0.97: the reference keeps those rows too" \
    reference "$T/r3.tns" "$T/i3" "$T/un.json" "$T/un" 0.1 holdout 0.97 2
py_check "holdout 0.97: the rows counted as the data says" \
    recompute "$T/r3.tns" "$T/un" "$T/un.json" holdout 0.97 2
run "$AMPED_RUN" --gpus 0 --observed nonzeros -r 2 --init "$T/i3" --iters 2 --l2 0.1 \
    --holdout 0.97 --seed 2 "$T/r3.amp"
check_contains "the summary says how many rows kept their value" "$RUN_OUT" \
    "rows kept: $un with no training entry"

# Singular systems: rank 4, no ridge, rows with fewer entries than 4.
"$PY" "$CHECK" init "$T/i3" 4 11 "$T/r3.tns"
run "$AMPED_RUN" --gpus 0 --observed nonzeros -r 4 --init "$T/i3" --iters 3 --tol 0 \
    --holdout 0.85 --seed 3 --json "$T/sg.json" -o "$T/sg" --format npy "$T/r3.amp"
check_status "rank 4, no ridge, holdout 0.85: exit 0" 0
sg=$("$PY" -c 'import json, sys
print(sum(json.load(open(sys.argv[1]))["completion"]["singular_rows"]))' "$T/sg.json")
check "rank 4 without a ridge: singular rows found ($sg)" test "${sg:-0}" -gt 0
check_contains "a warning names --l2 for them" "$RUN_ERR" "--l2 (a ridge) makes every row"
# The rows that stay solvable without a ridge are ill-conditioned (the
# test RMSE runs to hundreds): rounding differences grow by their
# condition number, so 1e-7 here, not 1e-10.
COMPLETION_TOL=1e-7
export COMPLETION_TOL
py_check "rank 4 without a ridge: the reference keeps the singular rows too" \
    reference "$T/r3.tns" "$T/i3" "$T/sg.json" "$T/sg" 0 holdout 0.85 3
unset COMPLETION_TOL

# ---- a planted model, 90% of its cells hidden ---------------------------
# 30 x 25 x 20, rank 3, Gaussian factors, noise sigma 0.01; 10% of the
# cells stored; the test entries are 2000 hidden cells. Completion from a
# random start can stop in a local minimum, as ALS can: the best of five
# seeds by TRAINING fit is taken, and its test RMSE must be below 2 sigma
# (0.02: the noise alone gives sigma, the ridge 1e-2 adds a little bias).
"$PY" "$CHECK" planted "$T/p.tns" "$T/pt.tns" "$T/truth" 7 0.1 0.01 >"$T/planted.out" 2>&1 ||
    { cat "$T/planted.out"; echo "Bail out! completion_check.py planted failed"; exit 1; }
run "$AMPED_PREP" -q -o "$T/p.amp" "$T/p.tns"
check_status "the planted tensor ($(cat "$T/planted.out")) prepares" 0
best= bestfit=-1
for s in 1 2 3 4 5; do
    run "$AMPED_RUN" -q --gpus 0 --observed nonzeros -r 3 --l2 0.01 --seed "$s" --iters 400 \
        --tol 1e-10 --holdout-file "$T/pt.tns" --json "$T/p$s.json" -o "$T/p$s" --format npy \
        "$T/p.amp"
    f=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["final_fit"])' \
        "$T/p$s.json" 2>/dev/null)
    if is_number "$f" && awk -v a="$f" -v b="$bestfit" 'BEGIN { exit !(a > b) }'; then
        best=$s bestfit=$f
    fi
done
check "the planted runs ran (best training fit $bestfit, seed $best)" test -n "$best"
py_check "90% hidden: the test RMSE of the best start is below 2 sigma" \
    rmse "$T/p$best.json" 0.02
py_check "90% hidden: its report recomputed from the factor files" \
    recompute "$T/p.tns" "$T/p$best" "$T/p$best.json" file "$T/pt.tns"
# The summary's numbers are the JSON's (which recompute checked): the
# final line, the counts, the rows kept; and each iteration line's.
run "$AMPED_RUN" --gpus 0 --observed nonzeros -r 3 --l2 0.01 --seed "$best" --iters 30 \
    --tol 0 --holdout-file "$T/pt.tns" --json "$T/pp.json" -o "$T/pp" --format npy "$T/p.amp"
check_status "the planted run printing its report: exit 0" 0
py_check "the printed report recomputed from the factor files" \
    recompute "$T/p.tns" "$T/pp" "$T/pp.json" file "$T/pt.tns"
check "every number printed is the JSON's, to the digits printed" "$PY" -c '
import json, re, sys
j = json.load(open(sys.argv[1]))
out = open(sys.argv[2]).read()
c = j["completion"]
m = re.search(r"final fit: (\S+) on the (\d+) training entries after (\d+) iterations? "
              r"\((?:converged|iteration limit)\); RMSE train (\S+), test (\S+) \((\d+) entries\)", out)
k = re.search(r"rows kept: (\d+) with no training entry, (\d+) with a singular system \(by mode:((?: \d+/\d+)+)\)", out)
assert m and k, "no final or rows-kept line"
assert abs(float(m.group(1)) - j["final_fit"]) <= 1e-10, "fit"
assert int(m.group(2)) == c["n_train"] and int(m.group(6)) == c["n_test"], "counts"
assert int(m.group(3)) == len(j["iterations"]), "iterations"
for g, key in ((4, "rmse_train"), (5, "rmse_test")):
    assert abs(float(m.group(g)) - c[key]) <= 1e-6 * c[key], key
pairs = [tuple(map(int, p.split("/"))) for p in k.group(3).split()]
assert [a for a, b in pairs] == c["unobserved_rows"] and [b for a, b in pairs] == c["singular_rows"]
assert int(k.group(1)) == sum(c["unobserved_rows"]) and int(k.group(2)) == sum(c["singular_rows"])
lines = re.findall(r"^ *(\d+)  (\S+)  (\S+)  (\S+)  (\S+) +\S+$", out, re.M)
assert len(lines) == len(j["iterations"]), "iteration lines"
for (it, fit, tr, te, dl), rec in zip(lines, j["iterations"]):
    assert int(it) == rec["iter"] and abs(float(fit) - rec["fit"]) <= 1e-10
    assert abs(float(tr) - rec["rmse_train"]) <= 1e-6 * rec["rmse_train"]
    assert abs(float(te) - rec["rmse_test"]) <= 1e-6 * rec["rmse_test"]
    assert abs(float(dl) - rec["delta"]) <= 1e-3 * max(rec["delta"], 1e-300)
' "$T/pp.json" "$RUN_OUT"

# ---- the holdout selection: the same whatever the layout ----------------
# Other shards and chunks renumber and reorder the copies; other thread
# counts split the rows otherwise: the test entries (drawn from the
# original coordinates) are the same, so the runs are too (to rounding:
# a row's entries may come in another order).
run "$AMPED_PREP" -q --shards 3 --chunk-nnz 100 -o "$T/p3.amp" "$T/p.tns"
check_status "the planted tensor, 3 shards and chunks of 100, prepares" 0
run "$AMPED_RUN" -q --gpus 0 --observed nonzeros -r 3 --l2 0.01 --seed 5 --iters 10 --tol 0 \
    --holdout 0.2 -t 1 --json "$T/h1.json" -o "$T/h1" --format npy "$T/p.amp"
check_status "holdout 0.2, 64 shards, 1 thread: exit 0" 0
run "$AMPED_RUN" -q --gpus 0 --observed nonzeros -r 3 --l2 0.01 --seed 5 --iters 10 --tol 0 \
    --holdout 0.2 -t 2 --json "$T/h2.json" -o "$T/h2" --format npy "$T/p3.amp"
check_status "holdout 0.2, 3 shards, 2 threads: exit 0" 0
py_check "other shards and threads: the same test entries and iterates" \
    same "$T/h1.json" "$T/h2.json" 1e-12
py_check "the test entries are the documented hash's" \
    recompute "$T/p.tns" "$T/h2" "$T/h2.json" holdout 0.2 5
run "$AMPED_RUN" -q --gpus 0 --observed nonzeros -r 3 --l2 0.01 --seed 5 --iters 10 --tol 0 \
    --holdout 0.2 -t 2 --json "$T/h3.json" "$T/p.amp"
check "1 and 2 threads, one layout: the same report numbers, bit for bit" \
    sh -c 'grep -o "\"fit\": [^,]*, \"delta\": [^,]*, \"rmse_train\": [^,]*, \"rmse_test\": [^,]*" "$1" >"$1.n" &&
           grep -o "\"fit\": [^,]*, \"delta\": [^,]*, \"rmse_train\": [^,]*, \"rmse_test\": [^,]*" "$2" >"$2.n" &&
           test -s "$1.n" && cmp -s "$1.n" "$2.n"' sh "$T/h1.json" "$T/h3.json"

# --holdout-file round trip: the entries --holdout drew, written as a
# file, give the same test RMSE when the fit excludes them (the training
# tensor without them).
"$PY" "$CHECK" split "$T/p.tns" 0.2 5 "$T/train.tns" "$T/test.tns"
run "$AMPED_PREP" -q -o "$T/train.amp" "$T/train.tns"
check_status "the training entries alone prepare" 0
"$PY" "$CHECK" init "$T/ip" 3 5 "$T/p.tns"
run "$AMPED_RUN" -q --gpus 0 --observed nonzeros -r 3 --l2 0.01 --iters 6 --tol 0 \
    --init "$T/ip" --holdout 0.2 --seed 5 --json "$T/rt1.json" "$T/p.amp"
check_status "holdout 0.2 from a given start: exit 0" 0
run "$AMPED_RUN" -q --gpus 0 --observed nonzeros -r 3 --l2 0.01 --iters 6 --tol 0 \
    --init "$T/ip" --holdout-file "$T/test.tns" --json "$T/rt2.json" "$T/train.amp"
check_status "the same split as a training tensor and --holdout-file: exit 0" 0
py_check "--holdout and --holdout-file of the same entries: the same iterates" \
    same "$T/rt1.json" "$T/rt2.json" 1e-11

# ---- one GPU against the CPU, from the same start -------------------------
if "$AMPED_RUN" --list-devices >/dev/null 2>&1; then
    run "$AMPED_PREP" -q --chunk-nnz 100 -o "$T/p1c.amp" "$T/p.tns"
    "$PY" "$CHECK" init "$T/ig" 3 21 "$T/p.tns"
    run "$AMPED_RUN" -q --gpus 0 --observed nonzeros -r 3 --l2 0.01 --init "$T/ig" \
        --iters 8 --tol 0 --holdout 0.1 --json "$T/g0.json" "$T/p.amp"
    check_status "GPU section: the CPU's run from a given start" 0
    while IFS='|' read -r what file args tol; do
        # shellcheck disable=SC2086
        run "$AMPED_RUN" -q --gpus 1 --observed nonzeros -r 3 --l2 0.01 --init "$T/ig" \
            --iters 8 --tol 0 --holdout 0.1 $args --json "$T/g1.json" "$T/$file"
        check_status "one GPU, $what: exit 0" 0
        py_check "one GPU, $what: every iteration's fit and RMSEs are the CPU's" \
            same "$T/g0.json" "$T/g1.json" "$tol"
    done <<'EOF2'
resident|p.amp|--memory resident|1e-10
streamed|p.amp|--memory stream --stream-chunk 1024|1e-10
from compressed chunks|p1c.amp|--memory compressed|1e-10
resident, f32|p.amp|--memory resident --precision f32|1e-4
EOF2
    run "$AMPED_RUN" -q --gpus 1 --observed nonzeros -r 3 --l2 0.01 --init "$T/ig" \
        --iters 8 --tol 0 --holdout-file "$T/pt.tns" --json "$T/g2.json" -o "$T/g2" \
        --format npy "$T/p.amp"
    check_status "one GPU, --holdout-file: exit 0" 0
    py_check "one GPU: the report recomputed from the factor files" \
        recompute "$T/p.tns" "$T/g2" "$T/g2.json" file "$T/pt.tns"
else
    skip "one GPU against the CPU" "no CUDA device (amped-run --list-devices)"
fi
# ---- two GPUs against the CPU: each its rows' systems ---------------------
ngpus=0
"$AMPED_RUN" --list-devices >/dev/null 2>&1 && ngpus=$("$AMPED_RUN" --list-devices | grep -c '^GPU ')
if test "$ngpus" -ge 2; then
    while IFS='|' read -r what args tol; do
        # shellcheck disable=SC2086
        run "$AMPED_RUN" -q --gpus 2 --observed nonzeros -r 3 --l2 0.01 --init "$T/ig" \
            --iters 8 --tol 0 --holdout 0.1 $args --json "$T/g3.json" "$T/p.amp"
        check_status "two GPUs, $what: exit 0" 0
        py_check "two GPUs, $what: every iteration's fit and RMSEs are the CPU's" \
            same "$T/g0.json" "$T/g3.json" "$tol"
    done <<'EOF2'
resident|--memory resident|1e-9
streamed|--memory stream --stream-chunk 1031|1e-9
resident, copies|--memory resident --exchange copy|1e-9
EOF2
    run "$AMPED_RUN" -q --gpus 2 --observed nonzeros -r 3 --l2 0.01 --init "$T/ig" \
        --iters 8 --tol 0 --holdout-file "$T/pt.tns" --json "$T/g4.json" -o "$T/g4" \
        --format npy "$T/p.amp"
    check_status "two GPUs, --holdout-file: exit 0" 0
    py_check "two GPUs: the report recomputed from the factor files" \
        recompute "$T/p.tns" "$T/g4" "$T/g4.json" file "$T/pt.tns"
else
    skip "two GPUs against the CPU" "fewer than two CUDA devices (amped-run --list-devices)"
fi

# ---- options at their edges ---------------------------------------------
run "$AMPED_RUN" -q --gpus 0 --observed nonzeros -r 2 --iters 2 --holdout 0 \
    --json "$T/h0.json" "$T/r3.amp"
check_status "--holdout 0: exit 0 (no test entries)" 0
check "--holdout 0: the test RMSE is null, the counts say 0" \
    "$PY" -c 'import json, sys
j = json.load(open(sys.argv[1]))
c = j["completion"]
sys.exit(not (c["n_test"] == 0 and c["rmse_test"] is None and j["iterations"][-1]["rmse_test"] is None))' "$T/h0.json"
while IFS='|' read -r what args text; do
    # shellcheck disable=SC2086
    run "$AMPED_RUN" -q --gpus 0 -r 2 --iters 1 $args "$T/r3.amp"
    check_status "$what: a usage error (exit 2)" 2
    check_contains "$what: the message says why" "$RUN_ERR" "$text"
done <<EOF
--holdout 1|--observed nonzeros --holdout 1|expected a fraction of the stored entries, at least 0 and below 1
--holdout -0.1|--observed nonzeros --holdout -0.1|invalid value '-0.1' for --holdout
--holdout nan|--observed nonzeros --holdout nan|invalid value 'nan' for --holdout
--holdout with --observed all|--holdout 0.1|give --observed nonzeros too
--holdout-file without --observed nonzeros|--holdout-file $T/t3.tns|give --observed nonzeros too
--holdout and --holdout-file|--observed nonzeros --holdout 0.1 --holdout-file $T/t3.tns|--holdout-file reads them: give one
--observed maybe|--observed maybe|expected one of 'all', 'nonzeros'
--observed nonzeros --method hals|--observed nonzeros --method hals|not --method hals
--observed nonzeros --l1|--observed nonzeros --l1 0.1|takes --l2 (its ridge), not --constraint or --l1
EOF
# Equal-nnz, --overlap and the remapped copies are refused before any
# device is touched (exit 1: not a usage error, a limit of this version).
while IFS='|' read -r what args text; do
    # shellcheck disable=SC2086
    run "$AMPED_RUN" -q --observed nonzeros -r 2 --iters 1 $args "$T/r3.amp"
    check_status "--observed nonzeros $what: refused (exit 1)" 1
    check_contains "--observed nonzeros $what: the message says why" "$RUN_ERR" "$text"
done <<'EOF'
on 2 GPUs, equal-nnz|--gpus 2 --partition equal-nnz|--observed nonzeros on 2 GPUs takes the file's shards (--partition shards), not --partition equal-nnz: a row's system needs every nonzero of the row on one GPU
--devices 0,1, equal-nnz|--devices 0,1 --partition equal-nnz|--observed nonzeros on 2 GPUs takes the file's shards
--overlap|--gpus 2 --overlap|--overlap: not with --observed nonzeros
--memory remap|--memory remap|--memory remap: not with --observed nonzeros
EOF
# Several GPUs are no longer refused for completion: without two GPUs (or
# without CUDA) the run stops for want of them, as CP-ALS's does.
run "$AMPED_RUN" -q --gpus 2 --observed nonzeros -r 2 --iters 1 "$T/r3.amp"
ngpus=0
"$AMPED_RUN" --list-devices >/dev/null 2>&1 && ngpus=$("$AMPED_RUN" --list-devices | grep -c '^GPU ')
if test "$ngpus" -ge 2; then
    check_status "--observed nonzeros --gpus 2 on a machine of 2 GPUs: exit 0" 0
else
    check_status "--observed nonzeros --gpus 2 without 2 GPUs: exit 1" 1
    if test "$ngpus" = 1; then
        check_contains "... for want of GPUs" "$RUN_ERR" "--gpus 2: this machine has 1 GPU"
    else
        check_contains "... for want of GPUs" "$RUN_ERR" "--gpus 0 runs on the CPU"
    fi
fi
check_not_contains "--observed nonzeros --gpus 2: not refused for completion" "$RUN_ERR" \
    "one GPU for now"
printf '1 1 1 0.5\n1 8 1 0.25\n' >"$T/bad1.tns"
printf '1 1 1 0.5\n1 1 x 0.25\n' >"$T/bad2.tns"
printf '1 1 1 0.5\n0 1 1 0.25\n' >"$T/bad3.tns"
printf '1 1 1 1 0.5\n' >"$T/bad4.tns"
printf '# a comment\n1 1 1 0.5\n2 2 2 1.5e\n' >"$T/bad5.tns"
printf '# only a comment\n\n' >"$T/bad6.tns"
while IFS='|' read -r what file text; do
    run "$AMPED_RUN" -q --gpus 0 -r 2 --iters 1 --observed nonzeros --holdout-file "$T/$file" \
        "$T/r3.amp"
    check_status "a bad holdout file, $what: exit 1" 1
    check_contains "a bad holdout file, $what: the file and line named" "$RUN_ERR" "$text"
done <<'EOF'
an index beyond the dimension|bad1.tns|bad1.tns:2: index 8 of mode 2 is outside the tensor's 1 to 7
not an index|bad2.tns|bad2.tns:2: field 3: 'x' is not an index
index 0|bad3.tns|bad3.tns:2: index 0 of mode 1 is outside
4 modes for 3|bad4.tns|bad4.tns:1: expected 4 fields (3 indices and a value
a value that is not a number|bad5.tns|bad5.tns:3: field 4: '1.5e' is not a finite number
no entry|bad6.tns|bad6.tns: no test entry
EOF
run "$AMPED_RUN" -q --gpus 0 -r 2 --iters 1 --observed nonzeros --holdout-file \
    "$T/none.tns" "$T/r3.amp"
check_status "a missing holdout file: exit 1" 1
check_contains "a missing holdout file: named" "$RUN_ERR" "none.tns: cannot open"

done_testing
