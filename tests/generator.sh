#!/bin/sh
# bench/amped-gen: deterministic for any thread count, seeded, .tns and .bin
# outputs agree, the requested number of entries, indices inside the given
# dimensions, and power-law (skewed) slices where asked for.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_GEN"
need_program "$AMPED_PREP"

NNZ=20000
DIMS=1000,1000,1000
DIM=1000

# gen THREADS OUT [OPTIONS...]
gen() {
    _thr=$1
    _out=$2
    shift 2
    RUN_CMD="OMP_NUM_THREADS=$_thr $AMPED_GEN -o $_out --nnz $NNZ --dims $DIMS $*"
    OMP_NUM_THREADS=$_thr "$AMPED_GEN" -o "$_out" --nnz "$NNZ" --dims "$DIMS" "$@" \
        </dev/null >"$RUN_OUT" 2>"$RUN_ERR"
    RUN_RC=$?
}

# ---- determinism -------------------------------------------------------------
gen 1 "$T/s7-t1.tns" --seed 7 --exponent 1.5
check_status "amped-gen --seed 7 (1 thread) exits 0" 0
check "it writes a non-empty .tns" test -s "$T/s7-t1.tns"
is "the .tns has --nnz lines" "$(wc -l <"$T/s7-t1.tns" | tr -d ' ')" "$NNZ"
gen 2 "$T/s7-t2.tns" --seed 7 --exponent 1.5
check_status "amped-gen --seed 7 (2 threads) exits 0" 0
check_same "same seed, 1 and 2 threads: byte-identical .tns" "$T/s7-t1.tns" "$T/s7-t2.tns"
gen 3 "$T/s7-t3.tns" --seed 7 --exponent 1.5
check_status "amped-gen --seed 7 (3 threads) exits 0" 0
check_same "same seed, 1 and 3 threads: byte-identical .tns" "$T/s7-t1.tns" "$T/s7-t3.tns"
gen 1 "$T/s7-t1.bin" --seed 7 --exponent 1.5
check_status "amped-gen .bin (1 thread) exits 0" 0
gen 2 "$T/s7-t2.bin" --seed 7 --exponent 1.5
check_status "amped-gen .bin (2 threads) exits 0" 0
check_same "same seed, 1 and 2 threads: byte-identical .bin" "$T/s7-t1.bin" "$T/s7-t2.bin"
gen 1 "$T/s8.tns" --seed 8 --exponent 1.5
check_status "amped-gen --seed 8 exits 0" 0
# Both written, and different (cmp exits 1 only for files that differ; 2,
# for a missing file, is no difference).
check "different seeds give different tensors" \
    sh -c 'test -s "$1" && test -s "$2" && { cmp -s "$1" "$2"; test $? -eq 1; }' sh "$T/s7-t1.tns" "$T/s8.tns"
# Not just a relabelling: most lines differ.
same_lines=$(awk 'NR == FNR { a[FNR] = $0; next } a[FNR] == $0 { n++ } END { print n + 0 }' \
    "$T/s7-t1.tns" "$T/s8.tns")
check "different seeds: fewer than 10% of lines equal ($same_lines of $NNZ)" \
    test "$same_lines" -lt $((NNZ / 10))
gen 1 "$T/default-a.tns"
check_status "amped-gen without --seed exits 0" 0
gen 1 "$T/default-b.tns" --seed 1
check_status "amped-gen --seed 1 exits 0" 0
check_same "the default seed is 1" "$T/default-a.tns" "$T/default-b.tns"

# ---- .tns and .bin of one seed hold the same tensor ------------------------
# A .tns carries no dimensions (they are the largest indices), so it is read
# with the generator's --dims to compare with the .bin, whose header has them.
run "$AMPED_PREP" --stats --dims "$DIMS" "$T/s7-t1.tns"
check_status "amped-prep reads the .tns within --dims $DIMS" 0
stats_of "$RUN_OUT" >"$T/tns.stats"
run "$AMPED_PREP" --stats "$T/s7-t1.bin"
check_status "amped-prep reads the .bin" 0
check_contains "the .bin header holds the given dims" "$RUN_OUT" "dims:       1000 x 1000 x 1000"
stats_of "$RUN_OUT" >"$T/bin.stats"
check_same_stats ".bin and .tns of one seed: same statistics" "$T/tns.stats" "$T/bin.stats"
# amped-prep sums duplicates, the generator keeps them: compare with keep.
run "$AMPED_PREP" -q --duplicates keep -o "$T/back.tns" "$T/s7-t1.bin"
check_status "amped-prep converts the .bin back to .tns" 0
check_same ".bin converted back to .tns (duplicates kept) is the generator's .tns" \
    "$T/s7-t1.tns" "$T/back.tns"

# ---- entry count ---------------------------------------------------------------
run "$AMPED_PREP" --stats --duplicates keep "$T/s7-t1.tns"
check_status "amped-prep --duplicates keep reads the .tns" 0
check_contains "entries (duplicates kept) = --nnz" "$RUN_OUT" "nonzeros:   $NNZ"
cp "$RUN_OUT" "$T/keep.out"
run "$AMPED_PREP" --stats "$T/s7-t1.tns"
check_status "amped-prep (duplicates summed) reads the .tns" 0
nz=$(sed -n 's/^nonzeros: *//p' "$RUN_OUT")
dup=$(sed -n 's/^duplicates: *//p' "$RUN_OUT")
is "summed: nonzeros + duplicates = --nnz" "$((nz + dup))" "$NNZ"
# (--nnz given twice: the last one counts)
gen 2 "$T/n1.tns" --nnz 1 --seed 5
check_status "amped-gen --nnz 1 (given last) exits 0" 0
is "--nnz 1 writes one line" "$(wc -l <"$T/n1.tns" | tr -d ' ')" 1

# ---- indices, values ---------------------------------------------------------
bad=$(awk -v d=$DIM 'NF != 4 || $1 < 1 || $1 > d || $2 < 1 || $2 > d || $3 < 1 || $3 > d ||
    $4 <= 0 || $4 > 1 { n++ } END { print n + 0 }' "$T/s7-t1.tns")
is "every line: 3 indices in 1..$DIM and a value in (0, 1]" "$bad" 0
gen 2 "$T/counts.tns" --seed 7 --values counts
check_status "--values counts exits 0" 0
bad=$(awk '$4 != int($4) || $4 < 1 || $4 > 10 { n++ } END { print n + 0 }' "$T/counts.tns")
is "--values counts: integers from 1 to 10" "$bad" 0
run "$AMPED_PREP" --stats --duplicates keep "$T/counts.tns"
check_status "amped-prep reads the --values counts tensor" 0
check_contains "--values counts: both ends drawn" "$RUN_OUT" "values:     min 1, max 10,"
gen 2 "$T/counts-s15.tns" --seed 7 --values counts --exponent 1.5
# --values ones: the draws of --values counts with 1 each; amped-prep's sum
# of repeats makes each value the number of draws that hit the coordinate
# (counted here in awk: distinct coordinates, the largest multiplicity, the
# sum of squares for the norm).
gen 2 "$T/ones.tns" --seed 7 --values ones --exponent 1.5
check_status "--values ones exits 0" 0
is "--values ones: the coordinates of --values counts (same draws)" \
    "$(cut -d' ' -f1-3 "$T/ones.tns" | cksum)" "$(cut -d' ' -f1-3 "$T/counts-s15.tns" 2>/dev/null | cksum)"
is "--values ones: every value is 1" "$(awk '$4 != 1 { n++ } END { print n + 0 }' "$T/ones.tns")" 0
want=$(awk '{ c[$1 " " $2 " " $3]++ } END { for (k in c) { n++; s += c[k] * c[k]; if (c[k] > m) m = c[k] }
            printf "nonzeros:   %d|max %d, norm %.2f", n, m, sqrt(s) }' "$T/ones.tns")
run "$AMPED_PREP" --stats "$T/ones.tns"
check_status "amped-prep sums the --values ones tensor" 0
check_contains "--values ones: the distinct coordinates, as awk counts them" "$RUN_OUT" "${want%%|*}"
check_contains "--values ones: the largest count and the norm, as awk counts them" "$RUN_OUT" "${want#*|}"

# ---- power law -------------------------------------------------------------------
# max_degree FILE MODE: entries in the fullest slice of MODE (awk).
max_degree() {
    awk -v m="$2" '{ c[$m]++ } END { for (k in c) if (c[k] > x) x = c[k]; print x + 0 }' "$1"
}
mean=$((NNZ / DIM))
for m in 1 2 3; do
    deg=$(max_degree "$T/s7-t1.tns" $m)
    check "exponent 1.5, mode $m: fullest slice $deg > 20 x mean $mean" test "$deg" -gt $((20 * mean))
    is "exponent 1.5, mode $m: amped-prep's largest slice = awk's" \
        "$(sed -n "s/^mode $m .*largest holds \([0-9]*\) nonzeros.*/\1/p" "$T/keep.out")" "$deg"
done
gen 2 "$T/uniform.tns" --seed 7 --exponent 0
check_status "--exponent 0 (uniform) exits 0" 0
deg=$(max_degree "$T/uniform.tns" 1)
check "exponent 0, mode 1: fullest slice $deg < 3 x mean $mean (no skew)" test "$deg" -lt $((3 * mean))
gen 2 "$T/steep.tns" --seed 7 --exponent 3
check_status "--exponent 3 exits 0" 0
deg3=$(max_degree "$T/steep.tns" 1)
deg15=$(max_degree "$T/s7-t1.tns" 1)
check "a steeper exponent concentrates more (3: $deg3 > 1.5: $deg15)" test "$deg3" -gt "$deg15"
gen 2 "$T/e1.tns" --seed 7 --exponent 1
check_status "--exponent 1 (the logarithmic case) exits 0" 0
deg1=$(max_degree "$T/e1.tns" 1)
check "exponent 1 lies between 0 and 1.5 ($deg < $deg1 < $deg15)" \
    sh -c 'test "$1" -lt "$2" && test "$2" -lt "$3"' sh "$deg" "$deg1" "$deg15"

# ---- usage --------------------------------------------------------------------------
TRY="Try 'amped-gen --help' for more information."
run "$AMPED_GEN" --help
check_status "amped-gen --help exits 0" 0
check_contains "amped-gen --help shows the usage" "$RUN_OUT" "Usage: amped-gen"
run "$AMPED_GEN" --bogus-option
check_status "amped-gen with an unknown option exits 2" 2
check_last_line "amped-gen with an unknown option: the --help hint" "$RUN_ERR" "$TRY"
check_first_line_starts "amped-gen with an unknown option: the message starts with 'amped-gen: ' (not the path run)" "$RUN_ERR" "amped-gen: "
run "$AMPED_GEN" --nnz 10 --dims 5,5
check_status "amped-gen without -o exits 2" 2
check_last_line "amped-gen without -o: the --help hint" "$RUN_ERR" "$TRY"
run "$AMPED_GEN" -o "$T/x.txt" --nnz 10 --dims 5,5
check_status "amped-gen -o x.txt exits 2" 2
check "amped-gen -o x.txt writes nothing" test ! -e "$T/x.txt"
run "$AMPED_GEN" -o "$T/x.tns" --nnz 10 --dims 5
check_status "amped-gen with one mode exits 2" 2
run "$AMPED_GEN" -o "$T/x.tns" --nnz 10 --dims 5,5 --exponent 5
check_status "amped-gen --exponent 5 exits 2" 2
check_contains "amped-gen --exponent 5: the option is named" "$RUN_ERR" "--exponent"
run "$AMPED_GEN" -o "$T/x.tns" --nnz 0 --dims 5,5
check_status "amped-gen --nnz 0 exits 2" 2
run "$AMPED_GEN" -o "$T/x.tns" --nnz 10 --dims 5,5 --values bogus
check_status "amped-gen --values bogus exits 2" 2

done_testing
