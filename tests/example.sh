#!/bin/sh
# examples/cp_example.c, the README's C example, built against libamped by
# make check: it runs, and its fits are amped-run's on the same tensor,
# seed and options, iteration by iteration (the same code: bit for bit).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

EXAMPLE=$top_builddir/examples/cp_example
need_program "$EXAMPLE"
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
SAMPLE=$top_srcdir/data/sample.tns.zst

run "$EXAMPLE" "$SAMPLE" 4
check_status "the example decomposes the sample tensor" 0
check_contains "and says on which backend" "$RUN_OUT" " iterations on the "
sed -n 's/^iteration [0-9]*: fit //p' "$RUN_OUT" > "$T/lib.fits"

run "$AMPED_PREP" -q -o "$T/s.amp" "$SAMPLE"
check_status "amped-prep prepares it" 0
# The example runs 20 iterations at rank 4 with every other option at its
# default, on whatever backend the default picks: so does amped-run.
run "$AMPED_RUN" "$T/s.amp" -r 4 --iters 20 --json "$T/r.json"
check_status "amped-run decomposes it" 0
sed -n 's/.*"iter": [0-9]*, "fit": *\([0-9.e+-]*\).*/\1/p' "$T/r.json" | head -n 20 > "$T/run.fits.raw"
awk '{ printf "%.6f\n", $1 }' "$T/run.fits.raw" > "$T/run.fits"
check "the same fit at every iteration as amped-run's (to the 6 digits printed)" \
    cmp -s "$T/lib.fits" "$T/run.fits"
test -s "$T/lib.fits" || fail "the example printed no fits"

run "$EXAMPLE" "$T/missing.tns" 4
check_status "a missing file fails" 1
check_contains "with the library's message" "$RUN_ERR" "missing.tns"
run "$EXAMPLE" "$SAMPLE" 0
check_status "rank 0 fails" 1
check_contains "naming --rank" "$RUN_ERR" "--rank"
done_testing
