#!/bin/sh
# Messages that name the real cause (issue 27): GPU-only options on the
# CPU backend, an .amp file given to amped-prep, --dims smaller than the
# data, a damaged Zstandard input, plurals, where to report bugs, and the
# README's quick start (run twice, its files ignored by git). The driver
# messages and --devices without a GPU are in run_cli.sh.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP"
need_program "$AMPED_RUN"
TRY="Try 'amped-run --help' for more information."

"$AMPED_PREP" -q -o "$T/s.amp" "$top_srcdir/data/sample.tns.zst" ||
    { echo "Bail out! amped-prep failed"; exit 1; }

# ---- GPU-only options on the CPU backend -----------------------------------------
for opt in "--memory stream" "--device-memory 1G" "--partition equal-nnz" --overlap \
    "--send-parts 2" "--stream-chunk 100000" "--host-memory 1G"; do
    run "$AMPED_RUN" -q --gpus 0 $opt "$T/s.amp"
    check_status "--gpus 0 $opt: a usage error" 2
    check_contains "--gpus 0 $opt: names the option and why" "$RUN_ERR" "${opt%% *} applies to the GPU backend, and --gpus 0 asks for the CPU"
    check_last_line "--gpus 0 $opt: the --help hint" "$RUN_ERR" "$TRY"
done
# A rank above the GPU backend's 512 runs on the CPU whatever the machine:
# the CPU chosen for the user, who is warned that the option does nothing.
run "$AMPED_RUN" -q -r 513 --iters 1 --memory stream "$T/s.amp"
check_status "-r 513 --memory stream (the CPU chosen): runs" 0
check_contains "-r 513 --memory stream: warns that --memory is ignored" "$RUN_ERR" "amped-run: warning: --memory applies to the GPU backend; this run is on the CPU"

# ---- an .amp file given to amped-prep ----------------------------------------------
run "$AMPED_PREP" "$T/s.amp" -o "$T/x.tns"
check_status "amped-prep X.amp -o x.tns exits 1" 1
check_contains "amped-prep X.amp: says what the file is and what reads it" "$RUN_ERR" "$T/s.amp: this is an .amp file, which amped-prep writes and amped-run reads (amped-run --info $T/s.amp describes it)"
check_not_contains "amped-prep X.amp: no complaint about its first line" "$RUN_ERR" ":1:"
run_stdin "$T/s.amp" "$AMPED_PREP" --stats -
check_status "an .amp file on standard input exits 1" 1
check_contains "on standard input: recognized too" "$RUN_ERR" "(standard input): this is an .amp file"

# ---- --dims smaller than the data: the first offending line ----------------------------
# Line 2 is the first beyond --dims=4,8,8 (mode 2, 9 > 8); line 4 holds
# mode 2's largest index (12), the line reported before.
printf '1 1 5 1.0\n2 9 1 1.0\n3 2 7 1.0\n4 12 1 2.0\n' >"$T/d.tns"
run "$AMPED_PREP" --stats --dims=4,8,8 "$T/d.tns"
check_status "--dims smaller than the data exits 1" 1
is "--dims: the first offending line" "$(cat "$RUN_ERR")" "amped-prep: $T/d.tns:2: index 9 in mode 2 exceeds the given dimension 8"
run "$AMPED_PREP" --stats --dims=4,12,6 "$T/d.tns"
is "--dims: the first offending line of any mode (line 3, mode 3)" "$(cat "$RUN_ERR")" "amped-prep: $T/d.tns:3: index 7 in mode 3 exceeds the given dimension 6"
run "$AMPED_PREP" --stats --index-base=0 --dims=4,13,8 "$T/d.tns"
is "--dims, 0-based: index 4 of mode 1 is beyond a dimension of 4 (line 4)" "$(cat "$RUN_ERR")" "amped-prep: $T/d.tns:4: index 4 in mode 1 exceeds the given dimension 4"

# ---- a damaged Zstandard input: where --------------------------------------------------
# Three bytes at 200000 of the 522308 of data/sample.tns.zst overwritten:
# the decoder fails on the block that holds them, so the byte reported is
# at or after 200000 and within a block (128 KiB) and one slice of the
# input (4 KiB) of it; it was byte 0 wherever the damage was.
cp "$top_srcdir/data/sample.tns.zst" "$T/c.tns.zst"
chmod u+w "$T/c.tns.zst"
printf '\377\377\377' | dd of="$T/c.tns.zst" bs=1 seek=200000 conv=notrunc 2>/dev/null
run "$AMPED_PREP" --stats "$T/c.tns.zst"
check_status "damaged zstd input exits 1" 1
at=$(sed -n 's/.*corrupt zstd data, detected by byte \([0-9]*\) (the damage is there or before).*/\1/p' "$RUN_ERR")
check "damaged zstd: the byte reported (${at:-none}) is at or after the damage, within a block of it" \
    test -n "$at" -a "${at:-0}" -ge 200000 -a "${at:-0}" -le $((200000 + 131072 + 4096))

# ---- plurals -----------------------------------------------------------------------
run "$AMPED_RUN" -r 2 --iters 1 "$T/s.amp"
check_contains "--iters 1: 'at most 1 iteration,'" "$RUN_OUT" "at most 1 iteration, tol"
run "$AMPED_RUN" -r 2 --iters 2 "$T/s.amp"
check_contains "--iters 2: 'at most 2 iterations,'" "$RUN_OUT" "at most 2 iterations, tol"
printf '\211' >"$T/one.amp"
run "$AMPED_RUN" --info "$T/one.amp"
check_contains "a 1-byte .amp file: '1 byte'" "$RUN_ERR" "truncated: 1 byte, shorter than the 64-byte header"
printf '1 1 1.0\n' >"$T/one.tns"
run "$AMPED_PREP" -o "$T/one-nz.amp" "$T/one.tns"
check_status "a tensor of one nonzero prepares" 0
run "$AMPED_RUN" -r 1 --iters 1 "$T/one-nz.amp"
check_contains "one nonzero: '1 nonzero,'" "$RUN_OUT" "2 modes, 1 nonzero, dims"

# ---- issue 40's messages ---------------------------------------------------------
# A damaged section among many: "1 of 202 sections is", not "section is".
cp "$T/s.amp" "$T/dam.amp"
chmod u+w "$T/dam.amp"
sz=$(wc -c <"$T/dam.amp")
printf '\377\377' | dd of="$T/dam.amp" bs=1 seek=$((sz / 2)) conv=notrunc 2>/dev/null
run "$AMPED_RUN" --verify "$T/dam.amp"
check_status "--verify of a damaged file exits 1" 1
check_contains "--verify: '1 of N sections is damaged'" "$RUN_ERR" "FAILED: 1 of 202 sections is damaged or inconsistent"
# An empty item of a list is named, not skipped (it said "lists 2 values").
run "$AMPED_RUN" --method hals --constraint nonneg,,nonneg "$T/s.amp"
check_status "--constraint nonneg,,nonneg is a usage error" 2
is "... naming the empty value" "$(head -n 1 "$RUN_ERR")" "amped-run: --constraint nonneg,,nonneg: value 2 is empty: give none or nonneg for each mode"
run "$AMPED_RUN" --method hals --l1 1,0, "$T/s.amp"
is "--l1 1,0,: the empty value named" "$(head -n 1 "$RUN_ERR")" "amped-run: --l1 1,0,: value 3 is empty: give a number for each mode"
# A number no double holds (it said "from 0 to 1" of 1e-400).
run "$AMPED_RUN" --tol 1e-400 "$T/s.amp"
check_status "--tol 1e-400 is a usage error" 2
is "... saying it is too small for a double" "$(head -n 1 "$RUN_ERR")" "amped-run: invalid value '1e-400' for --tol: too small for a double (whose magnitudes run from 2.22507e-308 to 1.79769e+308, and 0); expected a number from 0 to 1"
# --init: a rank mismatch names the file's rank; a lambda file of rank 8
# with 3 values on a line says what a lambda file holds (it said "(rank 1)").
run "$AMPED_RUN" -q --gpus 0 -r 4 --iters 1 -o "$T/f4" "$T/s.amp"
check_status "factors of rank 4 are written" 0
run "$AMPED_RUN" --gpus 0 -r 8 --iters 1 --init "$T/f4" "$T/s.amp"
check_status "--init of rank 4 at -r 8 exits 1" 1
is "... suggesting the file's rank" "$(cat "$RUN_ERR")" "amped-run: $T/f4.mode1.mat:1: expected 8 values, found 4: these factors look to be of rank 4; give -r 4 to start from them"
run "$AMPED_RUN" -q --gpus 0 -r 8 --iters 1 -o "$T/f8" "$T/s.amp"
# A set without its manifest (as SPLATT's are) is read unchecked: the line
# itself must be what is refused.
rm -f "$T/f8.manifest"
awk 'NR == 2 { print $1, $1, $1; next } { print }' "$T/f8.lambda.mat" >"$T/l8" && mv "$T/l8" "$T/f8.lambda.mat"
run "$AMPED_RUN" --gpus 0 -r 8 --iters 1 --init "$T/f8" "$T/s.amp"
check_status "--init with 3 values on a lambda line exits 1" 1
is "... saying a lambda file holds one value a line" "$(cat "$RUN_ERR")" "amped-run: $T/f8.lambda.mat:2: 3 values; a lambda file holds one value a line, 8 lines at rank 8"

# ---- where to report bugs -----------------------------------------------------------
for prog in "$AMPED_PREP" "$AMPED_RUN"; do
    run "$prog" --help
    check_last_line "${prog##*/} --help: bugs go as the README says" "$RUN_OUT" "Report bugs: see the README, section Reporting bugs."
    check_not_contains "${prog##*/} --help: no address that does not exist" "$RUN_OUT" "github.com"
done
check "README.md has the section --help points to" grep '^## Reporting bugs$' "$top_srcdir/README.md"
for page in amped-prep.1 amped-run.1; do
    check_not_contains "$page: no address that does not exist" "$top_srcdir/man/$page" "github.com/amped"
done

# ---- the README's quick start -------------------------------------------------------
# Its second command, as printed, run twice in a copy of the tree's layout.
qs=$(sed -n '/^## Quick start/,/^## /p' "$top_srcdir/README.md" | grep '^\./amped-prep ')
mkdir "$T/qs" && ln -s "$AMPED_PREP" "$AMPED_RUN" "$T/qs/" && ln -s "$top_srcdir/data" "$T/qs/data"
# No command found (the README's layout changed) is a failure: sh -c ""
# exits 0, and would pass both runs with nothing run.
if test -n "$qs"; then
    (cd "$T/qs" && sh -c "$qs") >"$T/qs1.out" 2>&1
    is "the quick start's second command runs" "$?" 0
    (cd "$T/qs" && sh -c "$qs") >"$T/qs2.out" 2>&1
    rc=$?
    is "and runs again" "$rc" 0
    test "$rc" = 0 || diag_file "second run" "$T/qs2.out"
else
    fail "the quick start's second command runs"
    diag "no line starting './amped-prep ' under '## Quick start' in README.md"
    fail "and runs again"
fi
# The note about sudo sits in the paragraph about the command it concerns.
para=$(sed -n '/^The first command installs/,/^$/p' "$top_srcdir/README.md" | tr '\n' ' ')
case $para in
*"leave the \`sudo\` out"*) pass "README: the note on sudo is with the first command" ;;
*) fail "README: the note on sudo is with the first command"; diag "paragraph: $para" ;;
esac
if git -C "$top_srcdir" rev-parse --git-dir >/dev/null 2>&1; then
    written=$(ls "$T/qs" | grep '^sample\.')
    test -n "$written" || fail "git ignores the quick start's files: it wrote none"
    for f in $written; do
        check "git ignores the quick start's $f" git -C "$top_srcdir" check-ignore -q "$f"
    done
else
    skip "git ignores the quick start's files" "not a git checkout"
fi

done_testing
