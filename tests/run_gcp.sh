#!/bin/sh
# Generalized CP (--method gcp, issue 43) end to end, read back by
# tests/gcp_check.py with NumPy (and pyttb's own loss handles where it is
# installed): planted models recovered (factor match score at least 0.9)
# for gaussian (a sparse non-negative model's values with noise), poisson
# (counts drawn from it) and bernoulli-logit (0/1 drawn through the
# logistic of a blocks-plus-constant model); for every loss, the exact
# loss the JSON reports is the one recomputed from the factor files with
# pyttb's handle, and each epoch's estimate is within 4.5 of its stated
# standard errors of the exact loss; the same seed gives the same bits
# (again, on 1 and 2 threads, and from files of 1 and 3 shards); against
# pyttb's gcp_opt with its Adam on the same tensor and sample sizes,
# amped's final loss within 5% (pyttb's L-BFGS-B printed for scale); one
# GPU against the CPU (skipped without one); values a loss does not model
# refused by their coordinates; the options at their edges. Lazy Adam
# (--adam lazy, SparseAdam): its steps (and the dense ones) recomputed by
# NumPy from the samples tests/gcp_trace writes out, a planted
# bernoulli-logit model recovered with steps of 100 + 100 samples (most
# rows untouched by a step), the GPU's run against the CPU's.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_program "$AMPED_PREP" "$AMPED_RUN"
PY=${AMP_TEST_PYTHON:-python3}
CHECK="$top_srcdir/tests/gcp_check.py"
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

py_check() {   # description, gcp_check.py arguments...
    _what=$1
    shift
    if "$PY" "$CHECK" "$@" >"$T/py.out" 2>&1; then
        pass "$_what: $(tail -n 1 "$T/py.out")"
    else
        fail "$_what"
        sed 's/^/# /' "$T/py.out"
    fi
}

# ---- planted models ------------------------------------------------------
# rank, seed of the run, rate, most failed epochs: settled once, the runs
# being deterministic.
while read -r loss rank seed; do
    "$PY" "$CHECK" planted "$loss" "$T/$loss.tns" "$T/t-$loss" 5 >"$T/planted.out" 2>&1 ||
        { cat "$T/planted.out"; echo "Bail out! gcp_check.py planted $loss failed"; exit 1; }
    run "$AMPED_PREP" -q -o "$T/$loss.amp" "$T/$loss.tns"
    check_status "$loss: a planted tensor ($(cat "$T/planted.out")) prepares" 0
    run "$AMPED_RUN" --method gcp --loss "$loss" -r "$rank" --gpus 0 --seed "$seed" \
        --iters 300 --rate 1e-2 --max-fails 3 --epoch-iters 200 -o "$T/e-$loss" \
        --format npy --json "$T/$loss.json" "$T/$loss.amp"
    check_status "$loss: gcp, rank $rank, on the CPU: exit 0" 0
    check_contains "$loss: the header names the loss" "$RUN_OUT" "loss $loss,"
    check_contains "$loss: the epochs' header" "$RUN_OUT" \
        "epoch  loss (estimate)   stderr     exact loss"
    check_contains "$loss: the final line" "$RUN_OUT" "final loss (estimate): "
    py_check "$loss: the planted model is recovered" fms "$T/t-$loss" "$T/e-$loss" 0.9
    py_check "$loss: the JSON's exact loss is the factor files' (pyttb's handle)" \
        exact "$T/$loss.tns" "$T/e-$loss" "$T/$loss.json" "$loss"
    py_check "$loss: each epoch's estimate within 4.5 standard errors of the exact loss" \
        stderr "$T/$loss.json" 4.5
done <<'EOF'
gaussian 3 2
poisson 3 2
bernoulli-logit 4 2
EOF
case $(sed -n 's/^ *\([0-9]*\)  .*failed: back.*/\1/p' "$RUN_OUT" | head -1) in
'') fail "a failed epoch is reported as one"; diag_run ;;
*) pass "a failed epoch is reported as one (bernoulli-logit)" ;;
esac
last=$("$PY" -c 'import json, sys
j = json.load(open(sys.argv[1]))
print(j["method"], j["loss"], j["adam"], j["epoch_iters"], j["rate"], j["decay"],
      j["max_fails"], j["samples_grad"], j["exact"], j["lower_bound"], j["final_loss"] == min(
      i["loss"] for i in j["iterations"] if not i["failed"]))' "$T/bernoulli-logit.json")
is "the JSON's settings, and the final loss is the best accepted epoch's" "$last" \
    "gcp bernoulli-logit dense 200 0.01 0.1 3 [1000, 1000] enumerated None True"

# ---- lazy Adam -------------------------------------------------------------
# gcp_trace: 30 steps of 20 + 20 samples (most rows untouched by a step),
# the samples written out; NumPy recomputes each step from them.
GCP_TRACE=$top_builddir/tests/gcp_trace
while read -r loss kind; do
    mkdir -p "$T/tr-$loss-$kind"
    run "$GCP_TRACE" "$T/$loss.amp" 3 "$loss" 4 30 20 20 0.01 "$kind" "$T/tr-$loss-$kind"
    check_status "gcp_trace $loss $kind: exit 0" 0
    py_check "$loss, $kind Adam: 30 steps are NumPy's from the same samples" \
        adam "$T/tr-$loss-$kind" "$loss" 0.01 "$kind"
done <<'EOF'
bernoulli-logit lazy
poisson lazy
poisson dense
EOF
run "$AMPED_RUN" --method gcp --loss bernoulli-logit -r 4 --gpus 0 --seed 2 --iters 300 \
    --rate 1e-2 --max-fails 3 --epoch-iters 200 --samples-grad 100 --adam lazy \
    -o "$T/e-lazy" --format npy --json "$T/lazy.json" "$T/bernoulli-logit.amp"
check_status "bernoulli-logit, lazy Adam, 100 + 100 samples a step: exit 0" 0
check_contains "lazy Adam: the header says so" "$RUN_OUT" "lazy Adam, 200 steps an epoch"
py_check "lazy Adam: the planted bernoulli-logit model is recovered" \
    fms "$T/t-bernoulli-logit" "$T/e-lazy" 0.9
is "lazy Adam: the JSON says so" \
    "$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["adam"])' "$T/lazy.json")" \
    lazy

# ---- every loss: the exact loss, recomputed ----------------------------------
# Values of 1 (every loss models them) on the poisson tensor's cells.
awk '{ $NF = 1; print }' "$T/poisson.tns" >"$T/ones.tns"
run "$AMPED_PREP" -q -o "$T/ones.amp" "$T/ones.tns"
check_status "a tensor of ones prepares" 0
for loss in poisson-log bernoulli-odds gamma rayleigh huber; do
    run "$AMPED_RUN" -q --method gcp --loss "$loss" -r 3 --gpus 0 --iters 3 --epoch-iters 100 \
        -o "$T/o-$loss" --format npy --json "$T/o-$loss.json" "$T/ones.amp"
    check_status "$loss: exit 0" 0
    py_check "$loss: the JSON's exact loss is the factor files' (pyttb's handle)" \
        exact "$T/ones.tns" "$T/o-$loss" "$T/o-$loss.json" "$loss"
    py_check "$loss: each epoch's estimate within 4.5 standard errors of the exact loss" \
        stderr "$T/o-$loss.json" 4.5
done
run "$AMPED_RUN" -q --method gcp --loss huber --huber-delta 0.6 -r 3 --gpus 0 --iters 2 \
    --epoch-iters 100 -o "$T/o-h6" --format npy --json "$T/o-h6.json" "$T/ones.amp"
check_status "huber, --huber-delta 0.6: exit 0" 0
py_check "huber, delta 0.6: the exact loss is the factor files'" \
    exact "$T/ones.tns" "$T/o-h6" "$T/o-h6.json" huber 0.6
# Non-negative losses keep non-negative factors (the projection).
nonneg=$("$PY" -c 'import numpy as np, sys
print(all((np.load(f"{sys.argv[1]}.mode{m}.npy") >= 0).all() for m in (1, 2, 3)))' \
    "$T/o-gamma")
is "gamma: every factor entry at least 0 (the bound's projection)" "$nonneg" True

# ---- the same bits -------------------------------------------------------------
lines() { sed -n 's/^ *\([0-9][0-9]*  [0-9].*\)  *[0-9.]*$/\1/p' "$RUN_OUT"; }
gcp_run() {   # prefix, file, extra options...
    _p=$1 _f=$2
    shift 2
    run "$AMPED_RUN" --method gcp --loss poisson -r 3 --gpus 0 --seed 9 --iters 4 \
        --epoch-iters 150 --rate 1e-2 -o "$T/$_p" --format npy "$@" "$_f"
    lines >"$T/$_p.lines"
}
same_files() {   # prefix a, prefix b
    for f in mode1 mode2 mode3 lambda; do
        cmp -s "$T/$1.$f.npy" "$T/$2.$f.npy" || return 1
    done
}
gcp_run s1 "$T/poisson.amp"
gcp_run s2 "$T/poisson.amp"
check "the same seed twice: the same lines and factor files" \
    sh -c "cmp -s '$T/s1.lines' '$T/s2.lines' && test -s '$T/s1.lines'"
check "the same seed twice: the same factor files, byte for byte" same_files s1 s2
gcp_run t1 "$T/poisson.amp" -t 1
gcp_run t2 "$T/poisson.amp" -t 2
check "1 and 2 threads: the same lines" cmp -s "$T/t1.lines" "$T/t2.lines"
check "1 and 2 threads: the same factor files, byte for byte" same_files t1 t2
gcp_run seed10 "$T/poisson.amp" --seed 10
check "another seed: other factors" sh -c "! cmp -s '$T/s1.mode1.npy' '$T/seed10.mode1.npy'"
run "$AMPED_PREP" -q --shards 3 --chunk-nnz 500 -o "$T/p3.amp" "$T/poisson.tns"
check_status "the poisson tensor in 3 shards, chunks of 500" 0
gcp_run sh3 "$T/p3.amp"
check "1 shard and 3: the same lines" cmp -s "$T/s1.lines" "$T/sh3.lines"
check "1 shard and 3: the same factor files, byte for byte" same_files s1 sh3

# ---- against pyttb ------------------------------------------------------------
if test -n "$have_pyttb"; then
    run "$AMPED_RUN" -q --method gcp --loss poisson -r 3 --gpus 0 --seed 4 --iters 20 \
        --epoch-iters 200 -o "$T/py" --format npy --json "$T/py.json" "$T/poisson.amp"
    check_status "poisson, pyttb's defaults but 200 steps an epoch and 20 epochs" 0
    py_check "poisson: the final loss within 5% of pyttb's gcp_opt (Adam, same settings)" \
        pyttb "$T/poisson.tns" "$T/py.json" 3 poisson 200 20 7
else
    skip "poisson against pyttb" "no pyttb in $PY"
    skip "poisson against pyttb's loss" "no pyttb in $PY"
fi

# ---- one GPU against the CPU ------------------------------------------------
# The same draws on both; the sums' order differs (atomics), which Adam's
# division by sqrt(v) amplifies: each epoch's estimate within 1e-6
# relative, a bound set before any GPU run.
if "$AMPED_RUN" --list-devices >/dev/null 2>&1; then
    for g in 0 1; do
        run "$AMPED_RUN" -q --method gcp --loss bernoulli-logit -r 4 --gpus $g --seed 2 \
            --iters 5 --rate 1e-2 --epoch-iters 200 --json "$T/g$g.json" \
            "$T/bernoulli-logit.amp"
        check_status "bernoulli-logit, --gpus $g: exit 0" 0
    done
    py_check "one GPU: every epoch's estimate is the CPU's" same "$T/g0.json" "$T/g1.json" 1e-6
    for g in 0 1; do
        run "$AMPED_RUN" -q --method gcp --loss bernoulli-logit -r 4 --gpus $g --seed 2 \
            --iters 5 --rate 1e-2 --epoch-iters 200 --samples-grad 100 --adam lazy \
            --json "$T/l$g.json" "$T/bernoulli-logit.amp"
        check_status "bernoulli-logit, lazy Adam, --gpus $g: exit 0" 0
    done
    py_check "one GPU, lazy Adam: every epoch's estimate is the CPU's" \
        same "$T/l0.json" "$T/l1.json" 1e-6
    # Streamed: each step's samples drawn on the host (the CPU's draws) and
    # sent; the JSON says which way the GPU ran.
    for adam in dense lazy; do
        run "$AMPED_RUN" -q --method gcp --loss bernoulli-logit -r 4 --gpus 1 --memory stream \
            --seed 2 --iters 5 --rate 1e-2 --epoch-iters 200 --samples-grad 100 --adam $adam \
            --json "$T/s-$adam.json" "$T/bernoulli-logit.amp"
        check_status "bernoulli-logit, --memory stream, $adam Adam: exit 0" 0
        check_contains "--memory stream, $adam Adam: the JSON says stream" \
            "$T/s-$adam.json" '"memory": "stream"'
    done
    run "$AMPED_RUN" -q --method gcp --loss bernoulli-logit -r 4 --gpus 0 --seed 2 --iters 5 \
        --rate 1e-2 --epoch-iters 200 --samples-grad 100 --json "$T/s0.json" \
        "$T/bernoulli-logit.amp"
    py_check "one GPU, streamed samples, dense Adam: every epoch's estimate is the CPU's" \
        same "$T/s0.json" "$T/s-dense.json" 1e-6
    py_check "one GPU, streamed samples, lazy Adam: every epoch's estimate is the CPU's" \
        same "$T/l0.json" "$T/s-lazy.json" 1e-6
    check_contains "resident: the JSON says resident" "$T/l1.json" '"memory": "resident"'
    run "$AMPED_RUN" --method gcp --loss poisson -r 3 --gpus 1 --iters 3 --epoch-iters 100 \
        "$T/poisson.amp"
    check_contains "one GPU: the backend line" "$RUN_OUT" "backend:   gpu 0"
else
    skip "one GPU against the CPU (gcp)" "no CUDA device (amped-run --list-devices fails)"
    skip "one GPU against the CPU (gcp, lazy Adam)" "no CUDA device (amped-run --list-devices fails)"
    for k in 1 2 3 4 5 6 7; do
        skip "one GPU, streamed samples ($k of 7)" "no CUDA device (amped-run --list-devices fails)"
    done
fi

# ---- values and options ----------------------------------------------------
run "$AMPED_RUN" -q --method gcp --loss bernoulli-logit -r 2 --gpus 0 --iters 1 "$T/poisson.amp"
check_status "bernoulli-logit on counts: exit 1" 1
# The first nonzero of copy 1 (rows in fiber order since format 1.1) that is not 0 or 1.
check_contains "bernoulli-logit on counts: names the nonzero and the data it models" \
    "$RUN_ERR" "the nonzero at (11, 4, 11) has the value 3: --loss bernoulli-logit models binary (0 or 1) data"
printf '1 1 1 -0.5\n2 2 2 1\n' >"$T/neg.tns"
run "$AMPED_PREP" -q -o "$T/neg.amp" "$T/neg.tns"
run "$AMPED_RUN" -q --method gcp --loss gamma -r 1 --gpus 0 --iters 1 "$T/neg.amp"
check_status "gamma on a negative value: exit 1" 1
check_contains "gamma on a negative value: names it by its coordinates" "$RUN_ERR" \
    "the nonzero at (1, 1, 1) has the value -0.5: --loss gamma models non-negative data"
printf '1 1 1\n1 2 1\n2 1 1\n2 2 1\n' >"$T/full.tns"
run "$AMPED_PREP" -q -o "$T/full.amp" "$T/full.tns"
run "$AMPED_RUN" -q --method gcp -r 1 --gpus 0 --iters 1 "$T/full.amp"
check_status "every cell stored, default samples: exit 0 (no zeros asked for)" 0
run "$AMPED_RUN" -q --method gcp -r 1 --gpus 0 --iters 1 --samples-grad 4,4 "$T/full.amp"
check_status "every cell stored, zeros asked for: exit 2" 2
check_contains "every cell stored: says so" "$RUN_ERR" \
    "--samples-grad asks for 4 zeros, and every cell of the tensor is stored"
while IFS='|' read -r args status msg; do
    # shellcheck disable=SC2086
    run "$AMPED_RUN" -q -r 2 --gpus 0 $args "$T/ones.amp"
    check_status "$args: exit $status" "$status"
    check_contains "$args: says why" "$RUN_ERR" "$msg"
done <<'EOF'
--loss poisson|2|--loss applies to --method gcp, and the method is als
--method cp-apr --rate 0.1|2|--rate applies to --method gcp, and the method is cp-apr
--adam lazy|2|--adam applies to --method gcp, and the method is als
--method gcp --adam sparse|2|invalid value 'sparse' for --adam: expected one of 'dense', 'lazy'
--method gcp --loss logit|2|invalid value 'logit' for --loss: expected one of 'gaussian', 'poisson', 'poisson-log', 'bernoulli-logit', 'bernoulli-odds', 'gamma', 'rayleigh', 'huber'
--method gcp --huber-delta 1|2|--huber-delta is the threshold of --loss huber, and the loss is gaussian
--method gcp --loss huber --huber-delta 0|2|--huber-delta 0: give a positive threshold
--method gcp --samples-grad 0|2|--samples-grad 0: no samples at all
--method gcp --samples-grad 0,0|2|--samples-grad 0,0: no samples at all
--method gcp --samples-loss 1,2,3|2|--samples-loss
--method gcp --samples-loss 5,|2|--samples-loss 5,: value 2 is empty
--method gcp --epoch-iters 0|2|invalid value '0' for --epoch-iters
--method gcp --rate 0|2|--rate 0: give a positive step size
--method gcp --decay 0|2|--decay 0: give a factor above 0 and at most 1
--method gcp --decay 1.5|2|invalid value '1.5' for --decay
--method gcp --max-fails -1|2|invalid value '-1' for --max-fails
--method gcp --constraint nonneg|2|--method gcp takes no --constraint, --l1 or --l2
--method gcp --gpus 2 --iters 1|1|--method gcp runs on one GPU for now, and --gpus asks for 2
--method gcp --gpus 1 --memory compressed --iters 1|1|--memory compressed: --method gcp reads no chunk of the tensor on the GPU
--method gcp --gpus 1 --memory remap --iters 1|1|--memory remap: --method gcp reads no chunk of the tensor on the GPU
EOF
run "$AMPED_RUN" -q --method gcp -r 2 --gpus 0 --iters 2 --epoch-iters 10 --max-fails 0 \
    --samples-grad 7,3 --samples-loss 50 --json "$T/small.json" "$T/ones.amp"
check_status "--samples-grad 7,3 --samples-loss 50 --max-fails 0" 0
is "the samples as given; the run stops at its first failed epoch or after 2" \
    "$("$PY" -c 'import json, sys
j = json.load(open(sys.argv[1]))
it = j["iterations"]
print(j["samples_grad"], j["samples_loss"], len(it) == 2 or it[-1]["failed"])' "$T/small.json")" \
    "[7, 3] [50, 50] True"
done_testing
