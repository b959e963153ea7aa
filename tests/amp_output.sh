#!/bin/sh
# amped-prep -o X.amp never leaves a partial file under the final name: not
# when the disk fills (simulated with a file-size limit), not when killed
# (SIGTERM also removes the temporary file; SIGKILL cannot be caught), and
# an existing file is left as it was when the conversion fails.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

test -x "$AMPED_PREP" || skip_all "amped-prep is not built ($AMPED_PREP)"
test -x "$AMPED_GEN" || skip_all "amped-gen is not built ($AMPED_GEN)"
test -x "$AMPED_RUN" || skip_all "amped-run is not built ($AMPED_RUN)"

# no_temp_left DESCRIPTION PATH: no PATH.tmp.* sibling remains.
no_temp_left() {
    set -- "$1" "$2".tmp.*
    if test -e "$2"; then
        fail "$1"
        diag "left behind: $2"
        rm -f "$2"
    else
        pass "$1"
    fi
}

"$AMPED_GEN" -o "$T/mid.tns" --nnz 200000 --dims 5000,4000,3000 --seed 1 >/dev/null 2>&1 ||
    skip_all "amped-gen failed"

# ---- a full disk: writes fail with EFBIG past a 256 KiB file-size limit ----
run sh -c "trap '' XFSZ; ulimit -f 256 && exec '$AMPED_PREP' -q --level 0 -o '$T/full.amp' '$T/mid.tns'"
check_status "a write that fails (file too large) exits 1" 1
check_contains "the failure names the output" "$RUN_ERR" "$T/full.amp"
check "no file under the final name" test ! -e "$T/full.amp"
no_temp_left "the temporary file is removed" "$T/full.amp"

# ---- a failed conversion leaves an existing output as it was ----------------
printf 'previous contents\n' >"$T/keep.amp"
printf '1 2 3 1.0\n1 2 x\n' >"$T/bad.tns"
run "$AMPED_PREP" -q -o "$T/keep.amp" "$T/bad.tns"
check_status "a bad input exits 1" 1
is "the existing output is untouched" "$(cat "$T/keep.amp")" "previous contents"
no_temp_left "no temporary file remains" "$T/keep.amp"

# ---- killed while writing -------------------------------------------------
"$AMPED_GEN" -o "$T/big.tns" --nnz 3000000 --dims 200000,100000,50000 --seed 2 >/dev/null 2>&1 ||
    skip_all "amped-gen failed"

# kill_while_writing SIGNAL OUT: start amped-prep, send SIGNAL once its
# temporary file exists; prints the exit status, or "finished" if it was
# done before the temporary file was seen.
kill_while_writing() {
    OMP_NUM_THREADS=1 "$AMPED_PREP" -q --level 3 -o "$2" "$T/big.tns" </dev/null >/dev/null 2>&1 &
    pid=$!
    i=0
    while test $i -lt 600; do
        set -- "$1" "$2" "$2".tmp.*
        if test -e "$3"; then
            kill -s "$1" "$pid"
            wait "$pid"
            echo $?
            return
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            echo finished
            return
        fi
        sleep 0.05
        i=$((i + 1))
    done
    kill -s KILL "$pid" 2>/dev/null
    wait "$pid"
    echo timeout
}

st=$(kill_while_writing TERM "$T/term.amp")
case $st in
finished | timeout)
    skip "SIGTERM while writing: no partial file" "amped-prep was not caught writing ($st)"
    skip "SIGTERM while writing: temporary file removed" "not caught writing"
    skip "SIGTERM: dies of the signal" "not caught writing" ;;
*)
    check "SIGTERM while writing: no partial file" test ! -e "$T/term.amp"
    no_temp_left "SIGTERM while writing: temporary file removed" "$T/term.amp"
    is "SIGTERM: dies of the signal (status 143)" "$st" 143 ;;
esac

st=$(kill_while_writing KILL "$T/kill.amp")
case $st in
finished | timeout)
    skip "SIGKILL while writing: no partial file" "amped-prep was not caught writing ($st)" ;;
*)
    check "SIGKILL while writing: no partial file under the final name" test ! -e "$T/kill.amp"
    rm -f "$T/kill.amp".tmp.* ;;
esac

# And left alone, the same conversion completes and verifies.
run "$AMPED_PREP" -q -o "$T/done.amp" "$T/mid.tns"
check_status "uninterrupted, it completes" 0
run "$AMPED_RUN" --verify "$T/done.amp"
check_status "and the file verifies" 0

done_testing
