#!/bin/sh
# Outputs as a Unix tool writes them (issue 40): a FIFO, a character device
# or a descriptor (/dev/fd/N) written directly, '-' for standard output, a
# symlink followed to the file it names; no output naming the input or
# another output; all of a run's outputs or none; a factor set that mixes
# two runs refused by --init; amped-prep's outputs checked before its input
# is read. Nothing here touches the real /dev: the FIFOs are made here, the
# device nodes (mknod, root only) too.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP"
need_program "$AMPED_RUN"
# Absolute, for the runs from another directory ('-' below).
AMPED_PREP=$(cd "$(dirname "$AMPED_PREP")" && pwd)/amped-prep
AMPED_RUN=$(cd "$(dirname "$AMPED_RUN")" && pwd)/amped-run
here=$(pwd)
HOOKS=$(cd "$(dirname "$AMPED_RUN")" && pwd)/tests/amped-run-hooks

"$AMPED_PREP" -q -o "$T/s.amp" "$top_srcdir/data/sample.tns.zst" ||
    { echo "Bail out! amped-prep failed"; exit 1; }
# A tensor of 3 x 3 x 3: factor files of a few bytes, smaller than a
# report, for the file-size limit below.
printf '1 1 1 1.0\n2 2 1 2.0\n3 1 2 -1.5\n1 3 3 0.5\n2 2 2 1.25\n3 3 1 0.7\n' >"$T/tiny.tns"
"$AMPED_PREP" -q -o "$T/tiny.amp" "$T/tiny.tns" ||
    { echo "Bail out! amped-prep failed"; exit 1; }
# amped-run with a short decomposition
amprun() {
    "$AMPED_RUN" -r 3 --iters 3 "$@"
}
root=no
test "$(id -u)" = 0 && root=yes

# no_temp DIR: no NAME.tmp.XXXXXX left in DIR.
no_temp() {
    ! ls "$1" | grep -q '\.tmp\.'
}

# ---- a FIFO: written to its reader, left a FIFO --------------------------------
# timeout: should the FIFO be replaced by a file, its reader would wait for
# a writer forever.
mkfifo "$T/fifo"
timeout 60 cat "$T/fifo" >"$T/from-fifo" &
reader=$!
run amprun --json "$T/fifo" "$T/s.amp"
check_status "--json FIFO exits 0" 0
wait $reader
check "--json FIFO: the reader got the report" grep -q '"final_fit"' "$T/from-fifo"
check "--json FIFO: still a FIFO" test -p "$T/fifo"
check "--json FIFO: no temporary file beside it" no_temp "$T"
mkfifo "$T/p.tns"
timeout 60 cat "$T/p.tns" >"$T/from-fifo.tns" &
reader2=$!
run "$AMPED_PREP" -q -o "$T/p.tns" "$T/tiny.tns"
check_status "amped-prep -o FIFO.tns (no --force: written, not replaced) exits 0" 0
wait $reader2
check "amped-prep -o FIFO.tns: the reader got the tensor" test -s "$T/from-fifo.tns"
check "amped-prep -o FIFO.tns: still a FIFO" test -p "$T/p.tns"
mkfifo "$T/p.amp"
timeout 60 cat "$T/p.amp" >/dev/null &
reader2=$!
run "$AMPED_PREP" -q -f -o "$T/p.amp" "$T/tiny.tns"
check_status "amped-prep -f -o FIFO.amp (written out of order): exit 1" 1
check_contains "... saying why" "$RUN_ERR" "$T/p.amp: an .amp file is written out of order"
check "... and the FIFO is left a FIFO" test -p "$T/p.amp"
wait $reader2

# ---- '-': standard output -----------------------------------------------------------
mkdir "$T/cwd"
cd "$T/cwd" && run amprun --json - "$T/s.amp"
cd "$here"
check_status "--json - exits 0" 0
check_first_line_starts "--json -: the report on standard output, alone" "$RUN_OUT" "{"
check "--json -: no file named '-'" test ! -e "$T/cwd/-"
cd "$T/cwd" && run "$AMPED_PREP" --report - -o "$T/dash.tns" "$T/tiny.tns"
cd "$here"
check_status "amped-prep --report - exits 0" 0
check_first_line_starts "amped-prep --report -: the page on standard output, alone" "$RUN_OUT" "<!DOCTYPE html>"
check "amped-prep --report -: no file named '-'" test ! -e "$T/cwd/-"
cd "$T/cwd" && run amprun -o - "$T/s.amp"
cd "$here"
check_status "-o - (a set of files): a usage error" 2
check_contains "-o -: says why" "$RUN_ERR" "-o names a set of files"
check "-o -: no -.mode1.mat" test ! -e "$T/cwd/-.mode1.mat"

# ---- /dev/fd/N: the caller's descriptor ---------------------------------------------
RUN_CMD="amprun --json /dev/fd/3 $T/s.amp 3>$T/fd.json"
amprun --json /dev/fd/3 "$T/s.amp" 3>"$T/fd.json" </dev/null >"$RUN_OUT" 2>"$RUN_ERR"
RUN_RC=$?
check_status "--json /dev/fd/3 exits 0" 0
check "--json /dev/fd/3: the report in the file open as 3" grep -q '"final_fit"' "$T/fd.json"

# ---- a symlink: the file it names replaced, the link kept -----------------------------
mkdir "$T/elsewhere"
echo old >"$T/elsewhere/real.json"
ln -s elsewhere/real.json "$T/link.json"
run amprun --json "$T/link.json" "$T/s.amp"
check_status "--json SYMLINK exits 0" 0
check "--json SYMLINK: still a symlink" test -L "$T/link.json"
check "--json SYMLINK: the file it names has the report" grep -q '"final_fit"' "$T/elsewhere/real.json"
check "--json SYMLINK: no temporary file in either directory" sh -c "! ls '$T' '$T/elsewhere' | grep -q '\\.tmp\\.'"
ln -s elsewhere/new.html "$T/dangling.html"
run amprun --report "$T/dangling.html" "$T/s.amp"
check_status "--report DANGLING-SYMLINK exits 0" 0
check "--report DANGLING-SYMLINK: still a symlink" test -L "$T/dangling.html"
check "--report DANGLING-SYMLINK: the file it names is made" test -s "$T/elsewhere/new.html"

# ---- character devices (mknod: root only) ---------------------------------------------
# A file system mounted nodev opens no device: those checks skip there.
if test $root = yes && mknod "$T/null" c 1 3 2>/dev/null && mknod "$T/full" c 1 7 &&
    (echo x >"$T/null") 2>/dev/null; then
    run amprun -o "$T/dn" --json "$T/null" --report "$T/null" "$T/s.amp"
    check_status "--json and --report to one null device (allowed twice) exit 0" 0
    check "the null device is still a character device" test -c "$T/null"
    check "... and the factor files are in place" test -s "$T/dn.mode1.mat"
    run amprun --json "$T/full" "$T/s.amp"
    check_status "--json to a full device (1,7): exit 1" 1
    check_contains "--json FULL: the message names the device and the reason" "$RUN_ERR" "$T/full: write failed: No space left on device"
    check "--json FULL: still a character device" test -c "$T/full"
    run "$AMPED_PREP" -q -o "$T/full" "$T/tiny.tns"
    check_status "amped-prep -o to a device without a format suffix: a usage error" 2
    mknod "$T/blk" b 7 200
    run amprun --json "$T/blk" "$T/s.amp"
    check_status "--json to a block device: exit 1" 1
    check_contains "--json BLOCK-DEVICE: says so" "$RUN_ERR" "$T/blk: is a block device"
    check "--json BLOCK-DEVICE: left a block device" test -b "$T/blk"
else
    for d in "null device twice" "null device kept" "factor files" "full device" \
        "full device message" "full device kept" "prep to a device" "block device" \
        "block device message" "block device kept"; do
        skip "$d" "mknod needs root, and a file system that opens devices"
    done
fi

# ---- outputs that name the input or each other ---------------------------------------
cp "$T/s.amp" "$T/keep.amp"
run amprun --json "$T/s.amp" "$T/s.amp"
check_status "--json INPUT: a usage error" 2
check_contains "--json INPUT: says so" "$RUN_ERR" "--json $T/s.amp: the same file as the input $T/s.amp"
check "--json INPUT: the input is untouched" cmp -s "$T/s.amp" "$T/keep.amp"
ln "$T/s.amp" "$T/hard.amp"
run amprun --report "$T/hard.amp" "$T/s.amp"
check_status "--report HARD-LINK-TO-INPUT: a usage error" 2
ln -s s.amp "$T/soft.amp"
run amprun --json "$T/soft.amp" "$T/s.amp"
check_status "--json SYMLINK-TO-INPUT: a usage error" 2
check "the input is still untouched" cmp -s "$T/s.amp" "$T/keep.amp"
# (a program that replaced it fails the checks above, not every one below)
cp "$T/keep.amp" "$T/s.amp"
run amprun --json "$T/r" --report "$T/r" "$T/s.amp"
check_status "--json R --report R: a usage error" 2
check_contains "--json R --report R: says so" "$RUN_ERR" "--report $T/r: the same file as --json $T/r"
check "--json R --report R: nothing written" test ! -e "$T/r"
run amprun -o "$T/same" --json "$T/same.mode1.mat" "$T/s.amp"
check_status "-o SAME --json SAME.mode1.mat: a usage error" 2
check "-o SAME --json SAME.mode1.mat: nothing written" test ! -e "$T/same.mode1.mat"
mkdir "$T/sub"
ln -s sub "$T/subl"
run amprun --json "$T/sub/x.json" --report "$T/subl/x.json" "$T/s.amp"
check_status "the same new file through a symlinked directory: a usage error" 2
cp "$T/tiny.tns" "$T/t2.tns"
run "$AMPED_PREP" -q -f -o "$T/t2.tns" "$T/t2.tns"
check_status "amped-prep -f -o INPUT: a usage error" 2
check "amped-prep -f -o INPUT: the input is untouched" cmp -s "$T/tiny.tns" "$T/t2.tns"
run "$AMPED_PREP" -q -f --report "$T/t2.tns" -o "$T/t2.amp" "$T/t2.tns"
check_status "amped-prep -f --report INPUT: a usage error" 2
check "amped-prep -f --report INPUT: nothing written" test ! -e "$T/t2.amp"

# ---- all of a run's outputs, or none -----------------------------------------------------
# A file-size limit that the factors and the JSON fit and the page does
# not: the page fails, and none of the others may stay.
mkdir "$T/lim"
RUN_CMD="ulimit -f 10; amprun -o $T/lim/f --json $T/lim/r.json --report $T/lim/r.html $T/tiny.amp"
(ulimit -f 10; amprun -o "$T/lim/f" --json "$T/lim/r.json" --report "$T/lim/r.html" \
    "$T/tiny.amp") </dev/null >"$RUN_OUT" 2>"$RUN_ERR"
RUN_RC=$?
check_status "a page over the file-size limit: exit 1" 1
check_contains "... the message names the page" "$RUN_ERR" "$T/lim/r.html"
check "... and no output of the run is left, nor a temporary file" test -z "$(ls "$T/lim")"

# ---- a factor set mixed from two runs ----------------------------------------------------
run amprun --seed 1 -o "$T/a" "$T/s.amp"
run amprun --seed 2 -o "$T/b" "$T/s.amp"
check "-o writes PREFIX.manifest" grep -q '^amped factor set 1$' "$T/a.manifest"
check "the manifest lists every file of the set" sh -c "test \$(grep -c '^file ' '$T/a.manifest') = 4 && grep -q ' a.mode3.mat\$' '$T/a.manifest' && grep -q ' a.lambda.mat\$' '$T/a.manifest'"
run amprun --init "$T/a" "$T/s.amp"
check_status "--init from a whole set: exit 0" 0
cp "$T/b.mode2.mat" "$T/a.mode2.mat"
run amprun --init "$T/a" "$T/s.amp"
check_status "--init from a set with a file of another run: exit 1" 1
check_contains "... the message names the file that does not belong" "$RUN_ERR" "$T/a.mode2.mat: not the file of run"
run amprun --seed 1 -o "$T/a" "$T/s.amp"
rm "$T/a.lambda.mat"
run amprun --init "$T/a" "$T/s.amp"
check_status "--init from a set missing the lambda it lists: exit 1" 1
run amprun --seed 1 -o "$T/a" "$T/s.amp"
rm "$T/a.manifest"
run amprun --init "$T/a" "$T/s.amp"
check_status "--init from a set without a manifest (SPLATT's): read as it is" 0

# ---- a run stopped while its files take their names ------------------------------------
# tests/amped-run-hooks raises the signal once 2 files are in place
# (AMPED_TEST_PLACE_SIGNAL): SIGKILL there mixes the new mode 1 and 2 with
# an earlier run's mode 3, lambda and manifest, which --init must refuse;
# SIGTERM waits until the whole set is in place.
if test -x "$HOOKS"; then
    run amprun --seed 1 -o "$T/k" "$T/s.amp"
    run env AMPED_TEST_PLACE_SIGNAL=9:2 "$HOOKS" -r 3 --iters 3 --seed 2 -o "$T/k" "$T/s.amp"
    check_status "SIGKILL after 2 of the set's renames: killed (137)" 137
    run amprun --init "$T/k" "$T/s.amp"
    check_status "--init from the set it left: exit 1" 1
    check_contains "... naming the first file that does not belong" "$RUN_ERR" "$T/k.mode1.mat: not the file of run"
    rm -f "$T"/k.*
    run amprun --seed 1 -o "$T/k" --json "$T/k.json" "$T/s.amp"
    cp "$T/k.manifest" "$T/old-manifest"
    run env AMPED_TEST_PLACE_SIGNAL=15:2 "$HOOKS" -r 3 --iters 3 --seed 2 -o "$T/k" --json "$T/k.json" "$T/s.amp"
    check_status "SIGTERM after 2 of the set's renames: it ends by the signal (143)" 143
    check "... once the whole set is in place (the new run's manifest and JSON)" sh -c "grep -q '\"seed\": 2' '$T/k.json' && ! cmp -s '$T/k.manifest' '$T/old-manifest'"
    run amprun --init "$T/k" "$T/s.amp"
    check_status "... which --init reads: exit 0" 0
    id=$(sed -n 's/^run //p' "$T/k.manifest")
    check "... and the JSON names the manifest's run ($id)" grep -q "\"factors\": {\"prefix\": \"$T/k\", \"run\": \"$id\"}" "$T/k.json"
    check "... and no temporary file is left" no_temp "$T"
else
    skip "SIGKILL and SIGTERM while the set takes its names" "no $HOOKS"
fi

# ---- amped-prep: outputs checked before the input is read --------------------------------
# Standard input a FIFO that this shell holds open and never writes: a
# program that reads before it checks waits until timeout kills it (124).
mkfifo "$T/stdin"
exec 5<>"$T/stdin"
for out in "-o $T/missing/x.amp" "-o $T/x.amp --report $T/missing/p.html"; do
    RUN_CMD="amped-prep $out - < never-ending FIFO"
    timeout 20 "$AMPED_PREP" -q $out - <"$T/stdin" >"$RUN_OUT" 2>"$RUN_ERR"
    RUN_RC=$?
    check_status "amped-prep $out: fails before reading its input" 1
    check_contains "amped-prep $out: names the file" "$RUN_ERR" "$T/missing/"
done
exec 5>&-

done_testing
