#!/bin/sh
# amped-run --method (AO-ADMM, MU, HALS) from the command line: the
# options and their errors, non-negative factor files, the report and
# the JSON. The methods themselves: test_constrained.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_program "$AMPED_PREP"
need_program "$AMPED_RUN"

TRY="Try 'amped-run --help' for more information."
run "$AMPED_PREP" -q -o "$T/sample.amp" "$top_srcdir/data/sample.tns.zst"
check_status "the bundled sample prepares" 0

run "$AMPED_RUN" --help
check_status "--help: exit 0" 0
for want in "--method=M" "--constraint=C" "--l1=L" "--l2=L" "--admm-inner=N" "--admm-tol=T" \
    "(default als)" "(default 5)"; do
    check_contains "--help shows $want" "$RUN_OUT" "$want"
done

# Usage errors: exit 2, the message, the hint, nothing on stdout.
usage_error() {
    label=$1 want=$2
    shift 2
    run "$AMPED_RUN" "$@"
    check_status "$label: exit 2" 2
    check_contains "$label: says why" "$RUN_ERR" "$want"
    check_contains "$label: the hint" "$RUN_ERR" "$TRY"
    check_empty "$label: nothing on stdout" "$RUN_OUT"
}
usage_error "--method foo" "--method" --method foo "$T/sample.amp"
usage_error "--constraint positive" "--constraint" --method hals --constraint positive "$T/sample.amp"
usage_error "--l1 -1" "--l1" --method hals --l1 -1 "$T/sample.amp"
usage_error "--l2 abc" "--l2" --method hals --l2 abc "$T/sample.amp"
usage_error "--admm-inner 0" "--admm-inner" --method ao-admm --admm-inner 0 "$T/sample.amp"
usage_error "--admm-tol 2" "--admm-tol" --method ao-admm --admm-tol 2 "$T/sample.amp"
usage_error "a constraint with ALS" "--method als takes no constraint" --constraint nonneg "$T/sample.amp"
usage_error "MU with a mode unconstrained" "needs --constraint nonneg on every mode" \
    --method mu --constraint nonneg,none,nonneg "$T/sample.amp"
usage_error "two constraints for three modes" "lists 2 values and the tensor has 3 modes" \
    --method hals --constraint nonneg,none "$T/sample.amp"

# Each method: exit 0, the method and rules in the report, an update
# time, factor files with no negative entry.
for m in ao-admm mu hals; do
    run "$AMPED_RUN" -r 4 --iters 6 --tol 0 -t 2 --method $m --constraint nonneg \
        -o "$T/$m" --json "$T/$m.json" "$T/sample.amp"
    check_status "--method $m: exit 0" 0
    check_contains "--method $m: the report names it" "$RUN_OUT" "$m:"
    check_contains "--method $m: and the constraints" "$RUN_OUT" "constraints nonneg,nonneg,nonneg"
    check_contains "--method $m: the update's time" "$RUN_OUT" ", update "
    # Every entry a number: nan ("-nan" too) is no non-negative entry,
    # and a missing file is awk's error, not 0.
    neg=$(awk "$AWK_NUM"' { for (i = 1; i <= NF; i++) if (!num($i) || $i + 0 < 0) n++ }
        END { print n + 0 }' "$T/$m.mode1.mat" "$T/$m.mode2.mat" "$T/$m.mode3.mat" 2>&1)
    is "--method $m: no negative (nor NaN) entry in the factor files" "$neg" 0
    check "--method $m: the factor files are there" test -s "$T/$m.mode3.mat"
done
run "$AMPED_RUN" -r 4 --iters 6 --tol 0 -t 2 --method hals --constraint none,nonneg,nonneg \
    --l1 0.01 --l2 0,0.1,0 -o "$T/mixed" "$T/sample.amp"
check_status "--method hals with per-mode constraints and penalties: exit 0" 0
check_contains "per-mode rules: reported" "$RUN_OUT" "constraints none,nonneg,nonneg; l1 0.01,0.01,0.01; l2 0,0.1,0"
check_contains "--method ao-admm: inner iterations reported" "$T/ao-admm.json" '"admm_inner": 5'

if command -v python3 >/dev/null 2>&1; then
    run python3 -c '
import json, sys
for m in ("ao-admm", "mu", "hals"):
    d = json.load(open(sys.argv[1] + "/" + m + ".json"))
    assert d["method"] == m, d["method"]
    assert d["constraints"] == ["nonneg"] * 3 and d["l1"] == [0] * 3 and d["l2"] == [0] * 3
    assert d["timings"]["update"] > 0 and d["timings"]["solve"] == 0
    assert ("admm_inner" in d) == (m == "ao-admm")
    assert len(d["iterations"]) == 6
print("ok")' "$T"
    check_status "--json: the method, the rules and the update time" 0
else
    skip "the JSON report parses" "no python3 to read the JSON"
fi

done_testing
