#!/bin/sh
# amped-prep -o X.amp never leaves a partial file under the final name: not
# when the disk fills (simulated with a file-size limit), not when killed
# (SIGTERM also removes the temporary file; SIGKILL cannot be caught, and
# leaves nothing only where the output is an unnamed O_TMPFILE file), and
# an existing file is left as it was when the conversion fails. Each case
# runs both ways of writing (AMPED_OUTFILE_NAMED=1 forces the named
# temporary file).
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

# no_file_left DESCRIPTION DIR NAME: DIR holds nothing named NAME*.
no_file_left() {
    set -- "$1" "$2"/"$3"*
    if test -e "$2"; then
        fail "$1"
        diag "left behind: $2"
        rm -f "$2"
    else
        pass "$1"
    fi
}

# ---- a full disk: writes fail with EFBIG past a 256 KiB file-size limit ----
# Both programs ignore SIGXFSZ, whose default would kill them with no
# message and leave the temporary file; both ways of writing (unnamed,
# O_TMPFILE, and the named temporary file) clean up the same.
"$AMPED_PREP" -q -o "$T/mid.amp" "$T/mid.tns" || { echo "Bail out! amped-prep failed"; exit 1; }
for named in 0 1; do
    if test $named = 1; then how="named temporary file"; else how="unnamed file"; fi
    mkdir "$T/full$named"
    run env AMPED_OUTFILE_NAMED=$named sh -c "ulimit -f 256 && exec '$AMPED_PREP' -q --level 0 -o '$T/full$named/full.amp' '$T/mid.tns'"
    check_status "$how: a write past the file-size limit exits 1 (not killed by SIGXFSZ)" 1
    check_contains "$how: the failure names the output and the reason" "$RUN_ERR" "$T/full$named/full.amp: write failed: File too large"
    no_file_left "$how: nothing left in the directory" "$T/full$named" ""
    run env AMPED_OUTFILE_NAMED=$named sh -c "ulimit -f 256 && exec '$AMPED_RUN' -q -r 16 --iters 1 -o '$T/full$named/f' '$T/mid.amp'"
    check_status "$how: amped-run: factors past the file-size limit exit 1" 1
    check_contains "$how: amped-run: the failure names the factor file" "$RUN_ERR" "$T/full$named/f.mode1.mat: write failed: File too large"
    no_file_left "$how: amped-run: nothing left in the directory" "$T/full$named" ""
done

# ---- a file system without hard links (vfat, exFAT; AMPED_OUTFILE_NAMED=2) --
# amped-prep does not replace what is there without --force: where no
# hard link can put the file in place, a rename that refuses to replace.
mkdir "$T/nolink"
run env AMPED_OUTFILE_NAMED=2 "$AMPED_PREP" -q -o "$T/nolink/x.amp" "$T/mid.tns"
check_status "no hard links: amped-prep writes a new .amp" 0
no_file_left "no hard links: no temporary file left" "$T/nolink" "x.amp.tmp"
run env AMPED_OUTFILE_NAMED=2 "$AMPED_RUN" --info "$T/nolink/x.amp"
check_status "no hard links: ... which amped-run reads" 0
run env AMPED_OUTFILE_NAMED=2 "$AMPED_PREP" -q -o "$T/nolink/x.amp" "$T/mid.tns"
check_status "no hard links: a second amped-prep without --force exits 1" 1

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

# writing PID OUT: amped-prep PID writes OUT: its named temporary file
# exists, or it holds an unnamed file open in OUT's directory (shown in
# /proc as DIR/#INODE (deleted)).
writing() {
    set -- "$1" "$2" "$2".tmp.*
    test -e "$3" && return 0
    ls -l "/proc/$1/fd" 2>/dev/null | grep -F -e "${2%/*}/#" >/dev/null
}

# kill_while_writing SIGNAL OUT [NAMED]: start amped-prep (NAMED=1: with
# the named temporary file), send SIGNAL once it writes OUT; prints the exit
# status, "finished STATUS" if it was done before it was seen writing, or
# "timeout".
kill_while_writing() {
    AMPED_OUTFILE_NAMED=${3:-0} OMP_NUM_THREADS=1 "$AMPED_PREP" -q --level 3 -o "$2" "$T/big.tns" </dev/null >/dev/null 2>&1 &
    pid=$!
    i=0
    while test $i -lt 600; do
        if writing "$pid" "$2"; then
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

# A run that ended on its own before it was seen writing is a skip only
# when it succeeded: one that failed at once is a failure.
for named in 0 1; do
    if test $named = 1; then how="named temporary file"; else how="unnamed file"; fi
    mkdir "$T/term$named"
    st=$(kill_while_writing TERM "$T/term$named/term.amp" $named)
    case $st in
    "finished 0" | timeout)
        skip "$how: SIGTERM while writing: nothing left" "amped-prep was not caught writing ($st)"
        skip "$how: SIGTERM: dies of the signal" "not caught writing" ;;
    finished\ *)
        is "$how: SIGTERM: amped-prep, not caught writing, exits 0" "$st" "finished 0" ;;
    *)
        no_file_left "$how: SIGTERM while writing: nothing left (no partial file, no temporary file)" "$T/term$named" ""
        is "$how: SIGTERM: dies of the signal (status 143)" "$st" 143 ;;
    esac
done

# SIGKILL cannot be caught: the named temporary file stays behind (never a
# partial file under the final name); the unnamed file leaves nothing.
for named in 0 1; do
    if test $named = 1; then how="named temporary file"; else how="unnamed file"; fi
    mkdir "$T/kill$named"
    st=$(kill_while_writing KILL "$T/kill$named/kill.amp" $named)
    case $st in
    "finished 0" | timeout)
        skip "$how: SIGKILL while writing: no partial file" "amped-prep was not caught writing ($st)" ;;
    finished\ *)
        is "$how: SIGKILL: amped-prep, not caught writing, exits 0" "$st" "finished 0" ;;
    *)
        check "$how: SIGKILL while writing: no partial file under the final name" test ! -e "$T/kill$named/kill.amp"
        if test $named = 0; then
            no_file_left "$how: SIGKILL while writing: nothing left at all" "$T/kill$named" ""
        fi ;;
    esac
done

# And left alone, the same conversion completes and verifies.
run "$AMPED_PREP" -q -o "$T/done.amp" "$T/mid.tns"
check_status "uninterrupted, it completes" 0
run "$AMPED_RUN" --verify "$T/done.amp"
check_status "and the file verifies" 0

done_testing
