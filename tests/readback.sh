#!/bin/sh
# amped-run's outputs read back by readers that are not amped's
# (tests/readback.py): every .npy by np.load, its dtype (per --precision),
# shape (per --rows) and index files; the text and ktensor files parsed in
# Python; the fit of the written model recomputed from the .tns read in
# Python, against the printed and the JSON final fit; the JSON report,
# every number against the printed lines, the options and the sums it
# must satisfy; npy and ktensor against the text files of the same run to
# the bit; pyttb.import_data on the ktensor. For f32 and f64, --rows all
# and nonempty, CP-ALS and MU.
#
# The python is AMP_TEST_PYTHON, else python3. Without NumPy the script
# says SKIP, without pyttb its pyttb tests do; under CI (CI=true) either
# is a failure.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP"
need_program "$AMPED_RUN"
RB=$top_srcdir/tests/readback.py
PY=${AMP_TEST_PYTHON:-python3}

if ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
    if test "${CI:-}" = true; then
        echo "Bail out! no NumPy in $PY (CI=true needs it: .ci/run sets AMP_TEST_PYTHON)"
        exit 1
    fi
    skip_all "no NumPy in $PY (AMP_TEST_PYTHON names a python that has it)"
fi
HAVE_PYTTB=
"$PY" -c 'import pyttb' >/dev/null 2>&1 && HAVE_PYTTB=yes
if test -z "$HAVE_PYTTB" && test "${CI:-}" = true; then
    echo "Bail out! no pyttb in $PY (CI=true needs it: .ci/run sets AMP_TEST_PYTHON)"
    exit 1
fi

# readback WHAT ARGS...: readback.py's verdict, its failures shown.
readback() {
    _what=$1
    shift
    run "$PY" "$RB" "$@"
    if test "$RUN_RC" = 0; then
        pass "$_what"
    else
        fail "$_what"
        diag_file "readback.py $1" "$RUN_OUT"
        diag_file "its stderr" "$RUN_ERR"
    fi
}

# A small tensor with structure and empty slices: f64 values, and one
# whose values are all floats (amped-prep keeps those as f32).
for v in f64 f32; do
    run "$PY" "$RB" gen "$T/$v.tns" 7 $v
    test "$RUN_RC" = 0 || { diag_run; echo "Bail out! readback.py gen failed"; exit 1; }
    run "$AMPED_PREP" -q -o "$T/$v.amp" "$T/$v.tns"
    test "$RUN_RC" = 0 || { diag_run; echo "Bail out! amped-prep failed"; exit 1; }
done

# one VALUES METHOD FORMAT PRECISION ROWS TOL [L2]: run amped-run and
# check what it wrote; the prefix is
# $T/VALUES-METHOD-FORMAT-PRECISION-ROWS-TOL.
one() {
    _p=$T/$1-$2-$3-$4-$5-$6
    run "$AMPED_RUN" -t 1 -r 3 --iters 12 --tol "$6" --seed 5 --method "$2" --precision "$4" \
        ${7:+--l2 "$7"} -o "$_p" --format "$3" --rows "$5" --json "$_p.json" "$T/$1.amp"
    cp "$RUN_OUT" "$_p.out"
    if test "$RUN_RC" != 0; then
        fail "$*: amped-run exits 0"
        diag_run
        return
    fi
    readback "values $1, --method $2 --format $3 --precision $4 --rows $5 --tol $6: read back" \
        check "$T/$1.tns" "$_p" "$3" "$4" "$5" "$_p.out" "$_p.json" "$T/$1.amp" 3 1 5 "$6" 12 "$2" \
        ${7:-0}
}

for method in als mu; do
    for prec in f64 f32; do
        for rows in all nonempty; do
            for fmt in text npy; do
                one f64 $method $fmt $prec $rows 0
            done
            p=$T/f64-$method
            readback "$method $prec --rows $rows: the .npy files are the text ones, to the bit" \
                same "$p-npy-$prec-$rows-0" npy "$p-text-$prec-$rows-0" text $prec $rows 3
        done
        one f64 $method ktensor $prec all 0
        readback "$method $prec: the ktensor is the text files, to the bit" \
            same "$p-ktensor-$prec-all-0" ktensor "$p-text-$prec-all-0" text $prec all 3
        if test -n "$HAVE_PYTTB"; then
            readback "$method $prec: pyttb.import_data reads the ktensor, the model of the fit" \
                pyttb "$p-ktensor-$prec-all-0.ktn" "$T/f64.tns" "$p-ktensor-$prec-all-0.json"
        else
            skip "$method $prec: pyttb.import_data reads the ktensor" \
                "no pyttb in $PY (AMP_TEST_PYTHON names a python that has it)"
        fi
    done
done
# f32 values in the file; a run that converges (--tol) before --iters.
one f32 als npy f32 nonempty 0
one f32 als text f64 all 0.001
one f64 mu npy f64 all 0.001
# A fit that falls (AO-ADMM with a strong ridge): delta is its size.
one f64 ao-admm text f64 nonempty 0 50

# --mttkrp-only and --check: their own objects, as printed.
for kind in mttkrp-only check; do
    run "$AMPED_RUN" -t 1 -r 3 --iters 4 --$kind --json "$T/$kind.json" "$T/f64.amp"
    cp "$RUN_OUT" "$T/$kind.out"
    if test "$RUN_RC" = 0; then
        readback "--$kind: the JSON, as printed" other "$T/$kind.out" "$T/$kind.json" $kind 4
    else
        fail "--$kind: exits 0"
        diag_run
    fi
done

# amped-prep --stats: every line recomputed from the .tns, with
# duplicates summed and kept, explicit zeros (one written, one summed to),
# the largest magnitude a negative value,
# in base 1 and 0, f64 and f32 values.
for v in f64 f32; do
    { cat "$T/$v.tns"; printf '1 1 1 0.75\n1 1 1 -0.75\n2 2 2 0\n3 3 3 -99.5\n'; } > "$T/st$v.tns"
    awk '{ print $1 - 1, $2 - 1, $3 - 1, $4 }' "$T/st$v.tns" > "$T/st${v}0.tns"
    for pol in sum keep; do
        for base in 1 0; do
            f=$T/st$v; test $base = 0 && f=$T/st${v}0
            run "$AMPED_PREP" --stats --duplicates $pol --index-base $base "$f.tns"
            cp "$RUN_OUT" "$f.$pol.out"
            readback "amped-prep --stats, $v values, --duplicates $pol, base $base: every line" \
                prepstats "$f.tns" "$f.$pol.out" $pol $base
        done
    done
done

# Dimensions far above the nonzeros (3 million in mode 2, 600 nonzeros):
# the slice degrees are counted by sorting, not in a histogram.
awk 'BEGIN { for (i = 0; i < 600; i++)
                 printf "%d %d %d %d\n", i % 5 + 1, (i * 7 % 250) * 12007 + 1, i % 3 + 1, i % 9 - 4 }' \
    > "$T/wide.tns"
for pol in sum keep; do
    run "$AMPED_PREP" --stats --duplicates $pol "$T/wide.tns"
    cp "$RUN_OUT" "$T/wide.$pol.out"
    readback "amped-prep --stats, dimension 3 million, --duplicates $pol: every line" \
        prepstats "$T/wide.tns" "$T/wide.$pol.out" $pol 1
done

# The checker itself must fail on a wrong output: one factor value changed
# (by its last byte, in place, so shape and dtype hold), one file of the
# wrong dtype, and a JSON whose fit is not the printed one.
p=$T/f64-als-npy-f64-all-0
cp "$p.mode2.npy" "$T/keep.npy"
printf '\100' | dd of="$p.mode2.npy" bs=1 seek=$(($(wc -c <"$p.mode2.npy") - 1)) conv=notrunc 2>/dev/null
run "$PY" "$RB" check "$T/f64.tns" "$p" npy f64 all "$p.out" "$p.json" "$T/f64.amp" 3 1 5 0 12 als
check "the checker rejects a model with one value changed" \
    sh -c 'test "$1" != 0 && grep -q "^FAIL the written model.s fit" "$2"' sh "$RUN_RC" "$RUN_OUT"
cp "$T/keep.npy" "$p.mode2.npy"
"$PY" -c 'import sys, numpy as np; np.save(sys.argv[1], np.load(sys.argv[1]).astype("<f4"))' \
    "$p.mode2.npy"
run "$PY" "$RB" check "$T/f64.tns" "$p" npy f64 all "$p.out" "$p.json" "$T/f64.amp" 3 1 5 0 12 als
check "... and a factor of dtype <f4 in an f64 run" \
    sh -c 'test "$1" != 0 && grep -q "^FAIL .*dtype <f4, expected <f8" "$2"' sh "$RUN_RC" "$RUN_OUT"
cp "$T/keep.npy" "$p.mode2.npy"
"$PY" -c 'import sys, json
j = json.load(open(sys.argv[1])); j["iterations"][2]["fit"] += 1e-6
json.dump(j, open(sys.argv[2], "w"))' "$p.json" "$T/bad.json"
run "$PY" "$RB" check "$T/f64.tns" "$p" npy f64 all "$p.out" "$T/bad.json" "$T/f64.amp" 3 1 5 0 12 als
check "... and a JSON whose third fit is not the printed one" \
    sh -c 'test "$1" != 0 && grep -q "^FAIL iteration 3 fit: printed" "$2"' sh "$RUN_RC" "$RUN_OUT"

done_testing
