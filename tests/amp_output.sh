#!/bin/sh
# amped-prep -o X.amp never leaves a partial file under the final name: not
# when the disk fills (simulated with a file-size limit), not when killed
# (SIGTERM also removes the temporary file; SIGKILL cannot be caught), and
# an existing file is left as it was when the conversion fails.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP"
need_program "$AMPED_GEN"
need_program "$AMPED_RUN"

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
    { echo "Bail out! amped-gen failed"; exit 1; }

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

# ---- the .amp options -------------------------------------------------------
run "$AMPED_PREP" --stats --shards 4 "$T/mid.tns"
check_status "--shards without .amp output is a usage error" 2
check_contains "and says why" "$RUN_ERR" "--shards applies to .amp output only"
run "$AMPED_PREP" --level 23 -o "$T/l.amp" "$T/mid.tns"
check_status "--level 23 is a usage error" 2
printf '1 1 1 0.1\n2 2 2 3\n3 1 2 0.25\n' >"$T/inexact.tns"
run "$AMPED_PREP" -q --values f32 -o "$T/f32.amp" "$T/inexact.tns"
check_status "--values f32 on inexact values writes" 0
check_contains "and warns how many values were rounded" "$RUN_ERR" "1 of 3 values is not exact in f32"
run "$AMPED_RUN" --info "$T/f32.amp"
check_status "--info on the f32 file exits 0" 0
check_contains "the file holds f32 values" "$RUN_OUT" "values f32"
run "$AMPED_PREP" -q -o "$T/auto.amp" "$T/inexact.tns"
check_status "--values auto on inexact values writes" 0
run "$AMPED_RUN" --info "$T/auto.amp"
check_status "--info on it exits 0" 0
check_contains "--values auto keeps f64 when f32 would round" "$RUN_OUT" "values f64"
run "$AMPED_PREP" -q --values f64 --shards 3 --chunk-nnz 1000 -o "$T/opts.amp" "$T/mid.tns"
check_status "--values f64 --shards 3 --chunk-nnz 1000 writes" 0
run "$AMPED_RUN" --info "$T/opts.amp"
check_status "--info on it exits 0" 0
check_contains "--values f64 is honoured" "$RUN_OUT" "values f64"
check_contains "--shards 3 gives 3 shards per mode" "$RUN_OUT" "mode 1      3 shards"
check_contains "the parameters are recorded" "$RUN_OUT" "shards=3 chunk-nnz=1000 values=f64"
run "$AMPED_RUN" --verify "$T/opts.amp"
check_status "and the file verifies" 0

run "$AMPED_PREP" -q --remap-streams --chunk-nnz 5000 -o "$T/remap.amp" "$T/mid.tns"
check_status "--remap-streams writes" 0
run "$AMPED_RUN" --info "$T/remap.amp"
check_status "--info on the remap file exits 0" 0
check_contains "the file holds remap streams" "$RUN_OUT" "REMAP "
check_contains "and records the option" "$RUN_OUT" "remap-streams=yes"
run "$AMPED_RUN" --verify "$T/remap.amp"
check_status "and verifies (every stream a permutation of the next copy)" 0

# ---- killed while writing -------------------------------------------------
"$AMPED_GEN" -o "$T/big.tns" --nnz 3000000 --dims 200000,100000,50000 --seed 2 >/dev/null 2>&1 ||
    { echo "Bail out! amped-gen failed"; exit 1; }

# kill_while_writing SIGNAL OUT: start amped-prep, send SIGNAL once its
# temporary file exists; prints the exit status, "finished STATUS" if it
# was done before the temporary file was seen, or "timeout".
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
            echo "finished $?"
            return
        fi
        sleep 0.05
        i=$((i + 1))
    done
    kill -s KILL "$pid" 2>/dev/null
    wait "$pid"
    echo timeout
}

# A run that ended on its own before its temporary file was seen is a
# skip only when it succeeded: one that failed at once is a failure.
st=$(kill_while_writing TERM "$T/term.amp")
case $st in
"finished 0" | timeout)
    skip "SIGTERM while writing: no partial file" "amped-prep was not caught writing ($st)"
    skip "SIGTERM while writing: temporary file removed" "not caught writing"
    skip "SIGTERM: dies of the signal" "not caught writing" ;;
finished\ *)
    is "SIGTERM: amped-prep, not caught writing, exits 0" "$st" "finished 0" ;;
*)
    check "SIGTERM while writing: no partial file" test ! -e "$T/term.amp"
    no_temp_left "SIGTERM while writing: temporary file removed" "$T/term.amp"
    is "SIGTERM: dies of the signal (status 143)" "$st" 143 ;;
esac

st=$(kill_while_writing KILL "$T/kill.amp")
case $st in
"finished 0" | timeout)
    skip "SIGKILL while writing: no partial file" "amped-prep was not caught writing ($st)" ;;
finished\ *)
    is "SIGKILL: amped-prep, not caught writing, exits 0" "$st" "finished 0" ;;
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
