#!/bin/sh
# amped-run's output files: created before the decomposition (a directory
# that is missing or cannot be written fails at once, with nothing
# computed), a directory named as an output is said to be one (both
# programs), and factors of huge dimensions: the row map that writing them
# in the original index space needs is checked before the run, and
# --rows nonempty writes only the nonempty rows, each with its index.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP"
need_program "$AMPED_RUN"
TRY="Try 'amped-run --help' for more information."

"$AMPED_PREP" -q -o "$T/s.amp" "$top_srcdir/data/sample.tns.zst" ||
    { echo "Bail out! amped-prep failed"; exit 1; }

# ---- outputs created before any work -----------------------------------------
# --tol 0 --iters 1000: a run that would take a while were the files
# created only at the end; nothing on stdout means it stopped before the
# report of the tensor, let alone an iteration.
for out in "-o $T/missing/f" "--json $T/missing/r.json" "-o $T/f --json $T/missing/r.json"; do
    run "$AMPED_RUN" -r 8 --tol 0 --iters 1000 $out "$T/s.amp"
    check_status "$out into a missing directory exits 1" 1
    check_contains "$out: the message names the file and the reason" "$RUN_ERR" "$T/missing/"
    check_contains "$out: ... No such file or directory" "$RUN_ERR" "No such file or directory"
    check_empty "$out: nothing computed (nothing on stdout)" "$RUN_OUT"
done
check "and no factor file of the failed run is left" test ! -e "$T/f.mode1.mat"
# A directory where files cannot be created: read-only by mode, except for
# root, whom modes do not stop; /sys refuses new files even to root.
if test "$(id -u)" = 0; then
    ro=/sys
else
    mkdir "$T/ro" && chmod 555 "$T/ro"
    ro=$T/ro
fi
run "$AMPED_RUN" -r 8 --tol 0 --iters 1000 -o "$ro/f" "$T/s.amp"
check_status "-o into $ro (not writable) exits 1" 1
check_contains "-o into $ro: the message names the file" "$RUN_ERR" "$ro/f.mode1.mat: cannot create output"
check_empty "-o into $ro: nothing computed" "$RUN_OUT"
run "$AMPED_RUN" -r 8 --tol 0 --iters 1000 --json "$ro/r.json" "$T/s.amp"
check_status "--json into $ro exits 1" 1
check_contains "--json into $ro: the message names the file" "$RUN_ERR" "$ro/r.json: cannot create output"
check_empty "--json into $ro: nothing computed" "$RUN_OUT"

# ---- a directory named as the output -------------------------------------------
mkdir "$T/dir"
for force in "" -f; do
    run "$AMPED_PREP" -q $force -o "$T/dir" "$top_srcdir/data/sample.tns.zst"
    check_status "amped-prep $force -o DIR: a usage error" 2
    check_contains "amped-prep $force -o DIR: says it is a directory" "$RUN_ERR" "-o $T/dir: is a directory"
done
run "$AMPED_RUN" -q -o "$T/dir" "$T/s.amp"
check_status "amped-run -o DIR: a usage error" 2
check_contains "amped-run -o DIR: says it is a directory, and what -o takes" "$RUN_ERR" "-o $T/dir: is a directory; -o takes a prefix of file names"
check_last_line "amped-run -o DIR: the --help hint" "$RUN_ERR" "$TRY"
run "$AMPED_RUN" -q --json "$T/dir" "$T/s.amp"
check_status "amped-run --json DIR: a usage error" 2
check_contains "amped-run --json DIR: says it is a directory" "$RUN_ERR" "--json $T/dir: is a directory"
run "$AMPED_RUN" -q --rows nonempty "$T/s.amp"
check_status "--rows without -o: a usage error" 2
run "$AMPED_RUN" -q --rows some -o "$T/x" "$T/s.amp"
check_status "--rows some: a usage error" 2

# ---- huge dimensions ------------------------------------------------------------
# 4 modes of 2^40 indices, 5 nonzeros: the full layout's row map alone
# would be 8 TiB. Nonempty indices (1-based): mode 1 1 3 5 9 2^40, mode 2
# 1 2 7, mode 3 1 3 8, mode 4 1 4 2^40.
big=1099511627776
printf '1 1 1 1 1.0\n5 2 3 %s 2.0\n%s 7 3 4 -1.5\n9 2 8 4 0.5\n3 7 3 1 1.25\n' $big $big >"$T/huge.tns"
run "$AMPED_PREP" -q --dims=$big,$big,$big,$big -o "$T/huge.amp" "$T/huge.tns"
check_status "amped-prep writes the 4-mode 2^40 tensor" 0
run "$AMPED_RUN" -r 2 --iters 3 -o "$T/h" "$T/huge.amp"
check_status "-o in the original index space of 2^40 indices fails (exit 1)" 1
check_contains "before the run, with the size of the row map" "$RUN_ERR" "-o $T/h: mode 1 has $big indices: writing its factor in the original index space needs a row map of 8.00 TiB"
check_contains "and names --rows nonempty" "$RUN_ERR" "--rows nonempty writes only the 14 nonempty rows of the 4 modes"
check_not_contains "nothing computed" "$RUN_OUT" "iter"
check "no factor file left" test ! -e "$T/h.mode1.mat"

run "$AMPED_RUN" -r 2 --iters 3 --rows nonempty -o "$T/h" "$T/huge.amp"
check_status "--rows nonempty: the run succeeds" 0
check_contains "--rows nonempty: the summary says so" "$RUN_OUT" "(nonempty rows, each after its index)"
is "--rows nonempty, text: mode 1's indices, ascending, 1-based" "$(cut -d' ' -f1 "$T/h.mode1.mat" | tr '\n' ' ')" "1 3 5 9 $big "
is "--rows nonempty, text: mode 2's indices" "$(cut -d' ' -f1 "$T/h.mode2.mat" | tr '\n' ' ')" "1 2 7 "
is "--rows nonempty, text: mode 4's indices" "$(cut -d' ' -f1 "$T/h.mode4.mat" | tr '\n' ' ')" "1 4 $big "
is "--rows nonempty, text: an index and R=2 values a line" "$(awk 'NF != 3' "$T/h.mode1.mat" "$T/h.mode3.mat")" ""
is "--rows nonempty, text: lambda as before, R lines" "$(wc -l <"$T/h.lambda.mat" | tr -d ' ')" 2

run "$AMPED_RUN" -q -r 2 --iters 3 --rows nonempty --format npy -o "$T/h" "$T/huge.amp"
check_status "--rows nonempty --format npy: the run succeeds" 0
check "npy: mode 1 holds 5 rows of 2" grep -a "'shape': (5, 2)" "$T/h.mode1.npy"
check "npy: mode 1's index file is <u8 of 5" grep -a "'descr': '<u8', 'fortran_order': False, 'shape': (5,)" "$T/h.mode1.index.npy"
# The data after the 64- or 128-byte header: the header length is at 8.
hl=$(od -An -tu2 -j8 -N2 "$T/h.mode1.index.npy" | tr -d ' ')
is "npy: mode 1's indices, 0-based" "$(od -An -tu8 -v -j$((10 + hl)) "$T/h.mode1.index.npy" | tr -s ' \n' '  ' | sed 's/^ //')" "0 2 4 8 $((big - 1)) "

# The nonempty rows are the full layout's rows, where that fits: the
# sample tensor with --rows all and nonempty, the same seed.
run "$AMPED_RUN" -q -r 4 --iters 2 -o "$T/all" "$T/s.amp"
check_status "the sample, every row" 0
run "$AMPED_RUN" -q -r 4 --iters 2 --rows nonempty -o "$T/ne" "$T/s.amp"
check_status "the sample, nonempty rows" 0
for m in 1 2 3; do
    # (FILENAME, not NR == FNR: an empty first file would make the second
    # the table and compare nothing.)
    awk 'FILENAME == ARGV[1] { row[FNR] = $0; all++; next } { n++; i = $1; $1 = ""; sub(/^ /, ""); if (row[i] != $0) bad++ } END { exit bad > 0 || n == 0 || all == 0 }' \
        "$T/all.mode$m.mat" "$T/ne.mode$m.mat" >/dev/null 2>&1
    is "mode $m: each nonempty row equals the full layout's row of its index" "$?" 0
done
check_same "the same lambda" "$T/all.lambda.mat" "$T/ne.lambda.mat"

done_testing
