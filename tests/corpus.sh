#!/bin/sh
# The file corpus: every tests/files/good-* and bad-* file is read by
# amped-prep and checked against its sidecar NAME.expect (NAME being the
# whole file name, e.g. bad-nan.tns.expect beside bad-nan.tns):
#   line 1  the exit status
#   line 2  a fixed string that stdout (status 0) or stderr (otherwise) holds;
#           for bad files it names the file and the line or byte
#   line 3  (optional) extra amped-prep options
# Adding a file with its .expect adds its tests. A few inputs too large to
# commit (lines longer than 64 KiB) are generated here into the same form.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP" "$AMPED_RUN"
test -d "$FILES" || { echo "Bail out! no corpus directory ($FILES)"; exit 1; }

# ---- generated cases: line length limit (64 KiB = 65536 bytes) -------------
G=$T/gen
mkdir "$G"
# gen_expect NAME STATUS TEXT [OPTIONS]
gen_expect() {
    printf '%s\n%s\n' "$2" "$3" >"$G/$1.expect"
    test -z "$4" || printf '%s\n' "$4" >>"$G/$1.expect"
}
# repeat CHAR N: N copies of CHAR, no newline.
repeat() {
    awk -v c="$1" -v n="$2" 'BEGIN { s = c; while (length(s) < n) s = s s; printf "%s", substr(s, 1, n) }'
}
LONG="line is longer than 65536 bytes"
# The first line is a 70000-digit number.
{ repeat 1 70000; printf ' 1 1\n2 2 2\n'; } >"$G/bad-long-first.tns"
gen_expect bad-long-first.tns 1 "bad-long-first.tns:1: $LONG"
# A long line after good ones, one that would fail to parse anyway.
{ printf '1 1 1 1\n# comment\n2 2 2 '; repeat 9 70000; printf '\n3 3 3 3\n'; } >"$G/bad-long-data.tns"
gen_expect bad-long-data.tns 1 "bad-long-data.tns:3: $LONG"
# A long comment before any data, and one after data: the limit holds for
# comment lines too (amp_coo.h: "Comment lines are held to the same limit").
{ printf '#'; repeat ' ' 70000; printf '\n1 1 1 1\n'; } >"$G/bad-long-comment-first.tns"
gen_expect bad-long-comment-first.tns 1 "bad-long-comment-first.tns:1: $LONG"
{ printf '1 1 1 1\n#'; repeat x 70000; printf '\n2 2 2 2\n'; } >"$G/bad-long-comment.tns"
gen_expect bad-long-comment.tns 1 "bad-long-comment.tns:2: $LONG"
# A valid nonzero padded with blanks past the limit: "a longer line means a
# wrong or binary file, and is refused before it can exhaust memory".
{ printf '1 1 1 1\n2 2 2'; repeat ' ' 70000; printf '2\n'; } >"$G/bad-long-padded.tns"
gen_expect bad-long-padded.tns 1 "bad-long-padded.tns:2: $LONG"
# At the limit: a 65536-byte comment line is fine, 65537 bytes are not.
{ printf '#'; repeat ' ' 65535; printf '\n1 1 1 1\n'; } >"$G/good-line-at-limit.tns"
gen_expect good-line-at-limit.tns 0 "nonzeros:   1"
{ printf '#'; repeat ' ' 65536; printf '\n1 1 1 1\n'; } >"$G/bad-line-over-limit.tns"
gen_expect bad-line-over-limit.tns 1 "bad-line-over-limit.tns:1: $LONG"

# ---- one file -------------------------------------------------------------
# without_index_base OPTIONS: OPTIONS less any --index-base (files written by
# amped-prep are always 1-based).
without_index_base() {
    _skip=0
    _kept=
    for _o in $1; do
        if test $_skip = 1; then _skip=0; continue; fi
        case $_o in
        --index-base) _skip=1 ;;
        --index-base=*) ;;
        *) _kept="$_kept $_o" ;;
        esac
    done
    echo "$_kept"
}

# stats_rt FILE: statistics to compare across a round trip: no "input:" line,
# and no "duplicates:" line (summed duplicates are not written back).
stats_rt() {
    sed -e '/^input:/d' -e '/^duplicates:/d' "$1"
}

corpus_case() {
    f=$1
    name=${f##*/}
    read_expect "$f" || return
    if test -z "$status" || test -z "$text"; then
        fail "$name: ${exp##*/} gives an exit status and a text"
        return
    fi
    label="$name${opts:+ ($opts)}"
    # $opts is split into words on purpose.
    run "$AMPED_PREP" --stats $opts "$f"
    check_status "$label: exit status $status" "$status"
    if test "$status" = 0; then
        check_contains "$label: stdout holds '$text'" "$RUN_OUT" "$text"
        cp "$RUN_OUT" "$T/file.out"
    else
        check_contains "$label: stderr holds '$text'" "$RUN_ERR" "$text"
        check_empty "$label: nothing on stdout" "$RUN_OUT"
        if test "$(wc -l <"$RUN_ERR")" -eq 1 && grep '^amped-prep: ' "$RUN_ERR" >/dev/null; then
            pass "$label: one error line, prefixed 'amped-prep: '"
        else
            fail "$label: one error line, prefixed 'amped-prep: '"
            diag_run
        fi
    fi

    # Text through a pipe: the streaming reader must agree with the mapped one.
    case $name in
    *.tns)
        run_stdin "$f" "$AMPED_PREP" --stats $opts -
        check_status "$label on a pipe: exit status $status" "$status"
        if test "$status" = 0; then
            stats_of "$T/file.out" >"$T/a"
            stats_of "$RUN_OUT" >"$T/b"
            check_same_stats "$label on a pipe: same statistics" "$T/a" "$T/b"
        else
            # The message names standard input instead of the file.
            check_contains "$label on a pipe: stderr names standard input" "$RUN_ERR" \
                "$(printf '%s\n' "$text" | sed "s/^$name/(standard input)/")"
        fi
        ;;
    esac

    # Good files survive conversion to either format.
    if test "$status" = 0; then
        ropts=$(without_index_base "$opts")
        for ext in bin tns; do
            out=$T/rt.$ext
            rm -f "$out"
            run "$AMPED_PREP" -q $opts -o "$out" "$f"
            if test "$RUN_RC" != 0; then
                fail "$label: converts to .$ext"
                diag_run
                continue
            fi
            run "$AMPED_PREP" --stats $ropts "$out"
            if test "$RUN_RC" != 0; then
                fail "$label: the written .$ext reads back"
                diag_run
                continue
            fi
            stats_rt "$T/file.out" >"$T/a"
            stats_rt "$RUN_OUT" >"$T/b"
            check_same_stats "$label: round trip through .$ext keeps the statistics" "$T/a" "$T/b"
        done
    fi
}

ncase=0
for f in "$FILES"/good-* "$FILES"/bad-* "$G"/good-* "$G"/bad-*; do
    case $f in
    *.expect | *'*') continue ;;
    esac
    corpus_case "$f"
    ncase=$((ncase + 1))
done
# The duplicates' values, not only their count: summed per coordinate
# (1+3+0.5, 2+4, 5) in first-seen order, or kept as they came.
run "$AMPED_PREP" -q -o "$T/dup-sum.tns" "$FILES/good-duplicates.tns"
check_status "good-duplicates.tns: --duplicates=sum writes .tns" 0
is "good-duplicates.tns: each coordinate's values summed" "$(cat "$T/dup-sum.tns" 2>/dev/null)" \
    "$(printf '1 1 1 4.5\n2 2 2 6\n3 3 3 5')"
run "$AMPED_PREP" -q --duplicates=keep -o "$T/dup-keep.tns" "$FILES/good-duplicates.tns"
check_status "good-duplicates.tns: --duplicates=keep writes .tns" 0
check "good-duplicates.tns: --duplicates=keep keeps every line" cmp -s "$T/dup-keep.tns" \
    "$FILES/good-duplicates.tns"
# Kept repeats still stand for one entry, their sum: the norm and the fit
# are the summed tensor's (sqrt(4.5^2 + 6^2 + 5^2) = 9.01388, not the
# 7.43303 of the squares of the six values).
for d in sum keep; do
    run "$AMPED_PREP" -q --duplicates=$d -o "$T/dup-$d.amp" "$FILES/good-duplicates.tns"
    check_status "good-duplicates.tns: --duplicates=$d writes .amp" 0
    run "$AMPED_RUN" --info "$T/dup-$d.amp"
    check_status "good-duplicates.tns, --duplicates=$d: amped-run --info exits 0" 0
    check_contains "good-duplicates.tns, --duplicates=$d: the norm is the summed tensor's" \
        "$RUN_OUT" "norm 9.01388"
    run "$AMPED_RUN" -q --rank 2 --iters 3 --seed 1 --json "$T/dup-$d.json" "$T/dup-$d.amp"
    check_status "good-duplicates.tns, --duplicates=$d: amped-run runs" 0
done
fit_of() { sed -n 's/.*"final_fit": *\([^,}]*\).*/\1/p' "$1" 2>/dev/null; }
fk=$(fit_of "$T/dup-keep.json") fs=$(fit_of "$T/dup-sum.json")
# Two numbers first: two null fits (NaN, as from a norm of 0) read as 0 and
# 0 would pass.
if is_number "$fk" && is_number "$fs"; then
    check "good-duplicates.tns: the same fit with repeats kept as summed ($fk, $fs; 1e-12)" \
        awk -v a="$fk" -v b="$fs" 'BEGIN { d = a - b; exit !(d < 1e-12 && -d < 1e-12) }'
else
    fail "good-duplicates.tns: the same fit with repeats kept as summed ($fk, $fs; 1e-12)"
    diag "not two fits: '$fk' and '$fs'"
fi

# A corpus that failed to be found would otherwise pass with 0 tests.
check "the corpus has good and bad files ($ncase files)" test "$ncase" -ge 60

# Every sidecar belongs to a file.
orphans=
for e in "$FILES"/*.expect; do
    test -f "${e%.expect}" || orphans="$orphans ${e##*/}"
done
is "every .expect sidecar belongs to a corpus file" "$orphans" ""
check "tests/files/README.md exists" test -f "$FILES/README.md"
# Every corpus file is described in the README.
missing=
for f in "$FILES"/good-* "$FILES"/bad-*; do
    case $f in *.expect) continue ;; esac
    grep -F -e "${f##*/}" "$FILES/README.md" >/dev/null 2>&1 || missing="$missing ${f##*/}"
done
is "every corpus file is described in tests/files/README.md" "$missing" ""

done_testing
