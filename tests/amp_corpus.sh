#!/bin/sh
# The .amp corpus: every tests/files/amp-*.amp file (written by
# tests/files/gen-amp.py) is verified by amped-run and checked against its
# sidecar NAME.expect (NAME being the whole file name):
#   line 1  the exit status of amped-run --verify (0 or 1)
#   line 2  a fixed string that stdout (status 0) or stderr (otherwise)
#           holds; for bad files it names the file and the fault
#   line 3  the amped-run options (--verify)
# Besides: bad files give their diagnosis on stderr on a line prefixed
# 'amped-run: ', the first line so prefixed too, and nothing on stdout; no file crashes amped-run (an exit
# status of 128 or more is a signal); --info opens every good file and
# prints its nonzeros, and on a bad file either succeeds (damage that only
# --verify finds) or fails with the same diagnosis as --verify.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_RUN"
test -d "$FILES" || { echo "Bail out! no corpus directory ($FILES)"; exit 1; }

# check_no_crash DESCRIPTION: the last run ended by exit, not by a signal.
check_no_crash() {
    if test "$RUN_RC" -lt 128; then
        pass "$1"
    else
        fail "$1"
        diag "exit status $RUN_RC: killed by signal $((RUN_RC - 128))"
        diag_run
    fi
}

# check_error_line DESCRIPTION TEXT: stderr has a line that starts with
# 'amped-run: ' and holds TEXT (--verify may add a summary line after it).
check_error_line() {
    if grep -F -e "$2" "$RUN_ERR" 2>/dev/null | grep '^amped-run: ' >/dev/null; then
        pass "$1"
    else
        fail "$1"
        diag_run
    fi
}

amp_case() {
    f=$1
    name=${f##*/}
    read_expect "$f" || return
    if test -z "$status" || test -z "$text" || test -z "$opts"; then
        fail "$name: ${exp##*/} gives an exit status, a text and the options"
        return
    fi
    label="$name ($opts)"
    # $opts is split into words on purpose.
    run "$AMPED_RUN" $opts "$f"
    check_no_crash "$label: amped-run does not crash"
    check_status "$label: exit status $status" "$status"
    if test "$status" = 0; then
        check_contains "$label: stdout holds '$text'" "$RUN_OUT" "$text"
        check_empty "$label: nothing on stderr" "$RUN_ERR"
    else
        check_contains "$label: stderr holds '$text'" "$RUN_ERR" "$text"
        check_empty "$label: nothing on stdout" "$RUN_OUT"
        check_first_line_starts "$label: the first stderr line is prefixed 'amped-run: '" \
            "$RUN_ERR" "amped-run: "
        check_error_line "$label: the diagnosis is an 'amped-run: ' line" "$text"
    fi

    # The same verdict on one thread and on several.
    for t in 1 4; do
        run "$AMPED_RUN" -t $t $opts "$f"
        check_no_crash "$label -t $t: amped-run does not crash"
        check_status "$label -t $t: exit status $status" "$status"
    done

    run "$AMPED_RUN" --info "$f"
    check_no_crash "$name (--info): amped-run does not crash"
    if test "$status" = 0; then
        check_status "$name (--info): exit status 0" 0
        check_contains "$name (--info): prints the nonzeros" "$RUN_OUT" "nonzeros"
        check_empty "$name (--info): nothing on stderr" "$RUN_ERR"
    elif test "$RUN_RC" = 0; then
        # Damage in a chunk or relabelling: --info does not read those.
        check_contains "$name (--info): opens and prints the nonzeros" "$RUN_OUT" "nonzeros"
    else
        check_status "$name (--info): fails with exit status 1" 1
        check_contains "$name (--info): the same diagnosis as --verify" "$RUN_ERR" "$text"
        check_empty "$name (--info): nothing on stdout" "$RUN_OUT"
    fi
}

ngood=0
nbad=0
for f in "$FILES"/amp-*.amp; do
    test -f "$f" || continue
    amp_case "$f"
    case ${f##*/} in
    amp-good-*) ngood=$((ngood + 1)) ;;
    *) nbad=$((nbad + 1)) ;;
    esac
done
# A corpus that failed to be found would otherwise pass with 0 tests.
check "the .amp corpus has good files ($ngood)" test "$ngood" -ge 5
check "the .amp corpus has bad files ($nbad)" test "$nbad" -ge 30

# Names: amp-good-* exit 0, amp-bad-* exit 1.
misnamed=
for f in "$FILES"/amp-*.amp; do
    test -f "$f.expect" || continue
    case ${f##*/}:$(sed -n 1p "$f.expect") in
    amp-good-*:0 | amp-bad-*:1) ;;
    *) misnamed="$misnamed ${f##*/}" ;;
    esac
done
is "amp-good-* files expect exit 0, amp-bad-* files exit 1" "$misnamed" ""

# Every .amp file lies beside gen-amp.py's other output and is described
# in the README.
orphans=
for e in "$FILES"/*.amp.expect; do
    test -f "$e" || continue
    test -f "${e%.expect}" || orphans="$orphans ${e##*/}"
done
is "every .amp.expect sidecar belongs to an .amp file" "$orphans" ""
stray=
for f in "$FILES"/*.amp; do
    test -f "$f" || continue
    case ${f##*/} in amp-good-* | amp-bad-*) ;; *) stray="$stray ${f##*/}" ;; esac
done
is "every .amp file is named amp-good-* or amp-bad-*" "$stray" ""
check "tests/files/gen-amp.py exists" test -f "$FILES/gen-amp.py"
missing=
for f in "$FILES"/amp-*.amp; do
    test -f "$f" || continue
    grep -F -e "${f##*/}" "$FILES/README.md" >/dev/null 2>&1 || missing="$missing ${f##*/}"
done
is "every .amp file is described in tests/files/README.md" "$missing" ""

done_testing
