#!/bin/sh
# bench/powerlaw-counts, which makes rd100m-counts for the CP-APR bench:
# the same nonzero pattern and values as the baselines' powerlaw-gen (built
# from ../shared/baselines where that is beside the checkout), the counts
# against a NumPy count of the same samples (tests/powerlaw_counts.py),
# the same output for 1 and 2 threads and for .tns and .bin, and its
# argument errors.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

PLC=$top_builddir/bench/powerlaw-counts
need_program "$PLC"
need_program "$AMPED_PREP"
need_program "$AMPED_RUN"
PY=${AMP_TEST_PYTHON:-python3}
BASE=${AMP_BASELINES:-$top_srcdir/../shared/baselines}

# 3 and 4 modes; the second has dims of 1 and heavy repeats.
for shape in "60000 1.2 3000 500 2000" "3000 1.5 7 5 1 3"; do
    set -- $shape
    tag=$(echo "$shape" | tr ' ' _)
    run env OMP_NUM_THREADS=2 "$PLC" "$T/c-$tag.tns" $shape
    check_status "powerlaw-counts $shape exits 0" 0
    run env OMP_NUM_THREADS=1 "$PLC" "$T/c1-$tag.tns" $shape
    check_same "$shape: 1 and 2 threads give the same file" "$T/c-$tag.tns" "$T/c1-$tag.tns"
    is "$shape: the counts sum to the samples" \
        "$(awk '{ s += $NF } END { print s }' "$T/c-$tag.tns")" "$1"
    run "$PLC" "$T/h-$tag.tns" --values hash $shape
    check_status "powerlaw-counts --values hash $shape exits 0" 0
    if test -f "$BASE/powerlaw-gen.c" && ${CC:-cc} -O2 -fopenmp -o "$T/powerlaw-gen" \
            "$BASE/powerlaw-gen.c" -lm 2>/dev/null; then
        (cd "$T" && NOBLCO=1 ./powerlaw-gen "ref-$tag" $shape 2>/dev/null)
        # The baseline prints values to 6 decimals.
        bad=$(awk 'NR == FNR { a[FNR] = $0; n = FNR; next }
                   { split(a[FNR], r); for (k = 1; k < NF; k++) if (r[k] != $k) bad++
                     if (sprintf("%.6f", $NF) != r[NF]) bad++ }
                   END { print (FNR == n ? 0 : "lines " n " vs " FNR) + bad }' \
              "$T/ref-$tag.tns" "$T/h-$tag.tns")
        is "$shape: --values hash is powerlaw-gen's tensor (coordinates, values to 6 places)" "$bad" 0
        is "$shape: the counts' pattern is powerlaw-gen's" \
            "$(cut -d' ' -f1-$(($# - 2)) "$T/c-$tag.tns" | cksum)" \
            "$(cut -d' ' -f1-$(($# - 2)) "$T/ref-$tag.tns" | cksum)"
    else
        skip "$shape: no $BASE/powerlaw-gen.c or no C compiler"
        skip "$shape: no $BASE/powerlaw-gen.c or no C compiler"
    fi
    if "$PY" -c 'import numpy' >/dev/null 2>&1; then
        "$PY" "$top_srcdir/tests/powerlaw_counts.py" $shape >"$T/py-$tag.tns"
        check_same "$shape: each count as NumPy counts the same samples" "$T/py-$tag.tns" "$T/c-$tag.tns"
    elif test "${CI:-}" = true; then
        echo "Bail out! no NumPy in $PY (CI=true needs it: .ci/run sets AMP_TEST_PYTHON)"
        exit 1
    else
        skip "$shape: no NumPy in $PY"
    fi
done

# .bin holds the same tensor: amped-prep makes the same .amp of both.
run "$PLC" "$T/c.bin" 60000 1.2 3000 500 2000
check_status "powerlaw-counts to .bin exits 0" 0
run "$AMPED_PREP" -q -o "$T/b.amp" "$T/c.bin"
check_status "amped-prep reads the .bin" 0
run "$AMPED_PREP" -q -o "$T/t.amp" "$T/c-60000_1.2_3000_500_2000.tns"
check_status "amped-prep reads the .tns" 0
info() { "$AMPED_RUN" --info "$1" | grep '^tensor:\|^dims:\|^compacted:\|^mode '; }
info "$T/b.amp" >"$T/b.info"
info "$T/t.amp" >"$T/t.info"
check_same "the .bin and the .tns hold the same tensor (amped-run --info)" "$T/b.info" "$T/t.info"

run "$PLC" "$T/x.tns" 100 1.2 10
check_status "one dimension is a usage error" 2
run "$PLC" "$T/x.tns" 100 1.0 10 10
check_status "S = 1 is a usage error" 2
run "$PLC" "$T/x.txt" 100 1.2 10 10
check_status "an output neither .tns nor .bin is a usage error" 2
run "$PLC" "$T/x.tns" --values bogus 100 1.2 10 10
check_status "--values bogus is a usage error" 2
run "$PLC" "$T/x.tns" 100 1.2 4294967296 4294967296 2
check_status "dimensions whose product passes 64 bits are a usage error" 2

done_testing
