#!/bin/sh
# Every constrained method with every constraint and penalty it takes,
# end to end through amped-run and its factor files (issue 40), on a tiny
# tensor with as many negative values as positive ones, so that the
# non-negativity binds: tests/kkt_check.py reads the files back and checks
# that every non-negative mode has no negative entry and that the last
# mode's factor (times lambda) meets the KKT conditions of its last
# update's problem, given the other factors as written: within 1e-8 of the
# largest MTTKRP entry for HALS and for AO-ADMM (200 inner iterations, so
# each update solves its problem), 1e-3 for MU (it converges slowly: 9e-5
# and 2e-4 after 3000 iterations here). A non-negative factor must have an
# entry at the bound (0 or the floor), and the checker must reject factors
# changed to break the conditions. The row updates alone, against a
# reference: test_constrained.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_program "$AMPED_PREP" "$AMPED_RUN"
command -v python3 >/dev/null 2>&1 || skip_all "no python3 to read the factors"
KKT="$top_srcdir/tests/kkt_check.py"

cat >"$T/x.tns" <<'TNS'
1 1 1 0.5
1 2 1 -0.7
2 1 2 0.9
2 3 2 -0.4
3 2 1 0.3
3 3 2 0.8
1 3 2 -0.6
2 2 1 0.2
3 1 2 -0.9
4 1 1 0.4
4 2 2 -0.3
1 1 2 0.6
TNS
run "$AMPED_PREP" -q -o "$T/x.amp" "$T/x.tns"
check_status "a 4 x 3 x 2 tensor of both signs prepares" 0

for m in hals ao-admm mu; do
    case $m in
    mu) cons="nonneg" tol=1e-3 ;;
    *) cons="nonneg none" tol=1e-8 ;;
    esac
    for c in $cons; do
        for pen in "0 0" "0.05 0" "0 0.1" "0.05 0.1"; do
            set -- $pen
            l="$m, $c, l1 $1, l2 $2"
            rm -f "$T"/f.*
            run "$AMPED_RUN" -q --gpus 0 -t 1 -r 2 --iters 3000 --tol 0 --method $m \
                --admm-inner 200 --constraint $c --l1 $1 --l2 $2 -o "$T/f" "$T/x.amp"
            check_status "$l: exit 0" 0
            if python3 "$KKT" "$T/x.tns" "$T/f" 3 $c $1 $2 $tol >"$T/kkt" 2>&1; then
                pass "$l: $(tail -1 "$T/kkt") (at most $tol)"
            else
                fail "$l: the constraint and the KKT conditions"
                sed 's/^/# /' "$T/kkt"
            fi
            if test "$c" = nonneg; then
                n=$(cat "$T"/f.mode*.mat | tr ' ' '\n' | awk '$1 != "" && $1 + 0 <= 1e-9' | wc -l)
                if test "$n" -gt 0; then
                    pass "$l: the constraint binds ($n entries at the bound)"
                else
                    fail "$l: the constraint binds (no entry at the bound)"
                fi
            fi
        done
    done
done

# The checker fails factors that break the conditions: the last HALS
# run's (non-negative, l1 0.05, l2 0.1) with one entry negated, and the
# same files checked against l1 0.5.
run "$AMPED_RUN" -q --gpus 0 -t 1 -r 2 --iters 3000 --tol 0 --method hals --constraint nonneg \
    --l1 0.05 --l2 0.1 -o "$T/f" "$T/x.amp"
awk 'NR == 1 { $1 = -$1 } { print }' "$T/f.mode1.mat" >"$T/neg" && mv "$T/neg" "$T/f.mode1.mat"
if python3 "$KKT" "$T/x.tns" "$T/f" 3 nonneg 0.05 0.1 1e-8 >/dev/null 2>&1; then
    fail "the checker rejects a negative entry in a non-negative mode"
else
    pass "the checker rejects a negative entry in a non-negative mode"
fi
run "$AMPED_RUN" -q --gpus 0 -t 1 -r 2 --iters 3000 --tol 0 --method hals --constraint nonneg \
    --l1 0.05 --l2 0.1 -o "$T/f" "$T/x.amp"
if python3 "$KKT" "$T/x.tns" "$T/f" 3 nonneg 0.5 0.1 1e-8 >/dev/null 2>&1; then
    fail "the checker rejects factors of another l1"
else
    pass "the checker rejects factors of another l1"
fi
done_testing
