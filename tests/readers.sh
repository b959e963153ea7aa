#!/bin/sh
# Every reader takes what the matching writer can write, the extreme
# doubles included (subnormals, the largest double, negative zero, 17
# significant digits): amped-prep's .tns reader and its .bin reader, each
# value's bits checked in the .bin amped-prep writes and through a round
# trip .tns -> .bin -> .tns -> .bin; 8-byte indices; and amped-run's
# --init reader on factor files written by hand and by amped-run -o.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP"
need_program "$AMPED_RUN"

# ---- amped-prep: .tns and .bin --------------------------------------------------
# Each value with its bits (IEEE 754, computed apart from amped), one per
# line of the tensor, in the order the .bin keeps them.
cat > "$T/values" <<'EOF'
1e-320 00000000000007e8
1e308 7fe1ccf385ebc8a0
-1.7976931348623157e308 ffefffffffffffff
4.9406564584124654e-324 0000000000000001
0.12345678901234567 3fbf9add3746f65e
2.2250738585072014e-308 0010000000000000
-4.9e-324 8000000000000001
-0 8000000000000000
999999999999999 430c6bf52633fff8
1e15 430c6bf526340000
-999999999999999 c30c6bf52633fff8
9007199254740993 4340000000000000
2.2250738585072009e-308 000fffffffffffff
0.1 3fb999999999999a
EOF
n=$(wc -l <"$T/values")
# Distinct coordinates, 1-based, in 3 modes of 5; the bits, in order.
awk '{ printf "%d %d %d %s\n", NR % 5 + 1, int(NR / 5) + 1, (NR * 3) % 5 + 1, $1 }' \
    "$T/values" > "$T/x.tns"
awk '{ print $2 }' "$T/values" > "$T/want.bits"

# bits_of FILE.bin NNZ IW: the values of a FROSTT binary, 16 hex digits
# each, from the byte after the dimensions (28 + 3 IW).
bits_of() {
    od -A n -v -t x8 -j $((28 + 3 * $3)) -N $(($2 * 8)) "$1" | tr -s ' ' '\n' | sed '/^$/d'
}

run "$AMPED_PREP" --stats "$T/x.tns"
check_status "the .tns reader takes subnormals, the largest doubles, -0 and 17 digits" 0
check_line "... every one of them a nonzero" "$RUN_OUT" "nonzeros:   $n"
run "$AMPED_PREP" -q -o "$T/x.bin" "$T/x.tns"
check_status "... and writes them as .bin" 0
bits_of "$T/x.bin" "$n" 4 > "$T/x.bits"
check_same "the .bin holds each value to the bit" "$T/want.bits" "$T/x.bits"
run "$AMPED_PREP" -q -o "$T/y.tns" "$T/x.bin"
check_status "the .bin reader takes them back, to .tns" 0
run "$AMPED_PREP" -q -o "$T/y.bin" "$T/y.tns"
check_status "... and the .tns reader the writer's text of them" 0
check_same ".tns -> .bin -> .tns -> .bin: the same file, to the bit" "$T/x.bin" "$T/y.bin"
run "$AMPED_PREP" -q -o "$T/z.tns" "$T/y.bin"
check_same "... and the same text, written twice" "$T/y.tns" "$T/z.tns"
run "$AMPED_PREP" --stats "$T/y.bin"
check_line "the .bin reader: every nonzero" "$RUN_OUT" "nonzeros:   $n"

# 0-based input: the same values, read as base 0, round-trip the same way.
awk '{ print $1 - 1, $2 - 1, $3 - 1, $4 }' "$T/x.tns" > "$T/x0.tns"
run "$AMPED_PREP" -q --index-base 0 -o "$T/x0.bin" "$T/x0.tns"
check_status "0-based: written as .bin" 0
bits_of "$T/x0.bin" "$n" 4 > "$T/x0.bits"
check_same "0-based: each value to the bit" "$T/want.bits" "$T/x0.bits"
run "$AMPED_PREP" -q -o "$T/x0.tns" "$T/x0.bin" -f
run "$AMPED_PREP" -q -o "$T/x0b.bin" "$T/x0.tns"
check_same "0-based: .bin -> .tns -> .bin, to the bit" "$T/x0.bin" "$T/x0b.bin"

# Indices past 2^32: the writer takes 8-byte indices, the reader too.
printf '1 1 1 1e-320\n2 1 3 -0\n3 3 5000000000 1.7976931348623157e308\n' > "$T/w.tns"
run "$AMPED_PREP" -q -o "$T/w.bin" "$T/w.tns"
check_status "an index past 2^32: written as .bin" 0
check "... with 8-byte indices (byte 4 of the header)" \
    sh -c 'test "$(od -A n -t u4 -j 4 -N 4 "$1" | tr -d " ")" = 8' sh "$T/w.bin"
bits_of "$T/w.bin" 3 8 > "$T/w.bits"
printf '00000000000007e8\n8000000000000000\n7fefffffffffffff\n' > "$T/w.want"
check_same "... each value to the bit" "$T/w.want" "$T/w.bits"
run "$AMPED_PREP" -q -o "$T/w2.tns" "$T/w.bin"
check_line "the .bin reader: the index 5000000000 back" "$T/w2.tns" \
    "3 3 5000000000 1.7976931348623157e+308"
run "$AMPED_PREP" -q -o "$T/w2.bin" "$T/w2.tns"
check_same "... and .tns -> .bin -> .tns -> .bin, to the bit" "$T/w.bin" "$T/w2.bin"

# ---- amped-run --init --------------------------------------------------------------
# A tensor with empty slices and structure; amped-run -o's files read back
# by --init carry the run on exactly: one iteration, then one more from
# the files, gives the fit of two iterations to every printed digit
# (the files hold 17 digits; a reader that kept fewer would not).
i=0
while test $i -lt 600; do
    echo "$((i % 13 + 1)) $((i * 7 % 17 + 1)) $((i * 5 % 11 + 1)) $((i % 13 + i % 7 + 1)).$((i % 10))"
    i=$((i + 1))
done > "$T/g.tns"
run "$AMPED_PREP" -q -o "$T/g.amp" "$T/g.tns"
test "$RUN_RC" = 0 || { diag_run; echo "Bail out! amped-prep failed"; exit 1; }
run "$AMPED_RUN" -t 1 -r 3 --iters 2 --tol 0 --json "$T/two.json" "$T/g.amp"
check_status "two iterations: exit 0" 0
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 -o "$T/one" "$T/g.amp"
check_status "one iteration, -o: exit 0" 0
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --init "$T/one" --json "$T/more.json" "$T/g.amp"
check_status "--init from amped-run's files: exit 0" 0
# close13 LABEL A B: two fits within 1e-13 (the same sums, in the same
# order but for the start's scaling: an ulp or two apart at most).
close13() {
    if is_number "$2" && is_number "$3"; then
        check "$1 ($2, $3)" awk -v a="$2" -v b="$3" \
            'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-13) }'
    else
        fail "$1: not two numbers: '$2' and '$3'"
    fi
}
two=$(fits "$T/two.json" | sed -n 2p)
more=$(fits "$T/more.json" | sed -n 1p)
close13 "... its fit is the second iteration's, within 1e-13" "$more" "$two"

# By hand: mode 1 holds the extremes a writer can write (under ALS the
# first mode's start is replaced before it is used, so the run is the
# one above); the other modes amped-run's.
awk 'BEGIN { split("4.9406564584124654e-324 1.7976931348623157e308 -0 0.12345678901234567 " \
                   "-2.2250738585072014e-308 1e-320 -1.7976931348623157e+308 0 4.9e-324 " \
                   "1E+308 -0.0 2.2250738585072009e-308 +1.5 .5 5. 1e-310", v, " ")
             for (i = 0; i < 13; i++)
                 print v[(3 * i) % 16 + 1], v[(3 * i + 1) % 16 + 1], v[(3 * i + 2) % 16 + 1] }' \
    > "$T/hand.mode1.mat"
for f in mode2 mode3 lambda; do cp "$T/one.$f.mat" "$T/hand.$f.mat"; done
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --init "$T/hand" --json "$T/hand.json" "$T/g.amp"
check_status "--init: subnormals, +-DBL_MAX, -0, 17 digits, +1.5, .5, 5. are taken" 0
close13 "... and the run is the same" "$(fits "$T/hand.json" | sed -n 1p)" "$two"
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --mttkrp-only --init "$T/hand" "$T/g.amp"
check_status "... by --mttkrp-only's start too" 0

# The f32 run's files (%.9g) read back as well.
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --precision f32 -o "$T/f32" "$T/g.amp"
check_status "an f32 run, -o: exit 0" 0
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --precision f32 --init "$T/f32" "$T/g.amp"
check_status "--init from its files: exit 0" 0

# ---- amped-run --init: what it refuses, quoted by file and line ------------------
# init_says WHAT MESSAGE: amped-run --init $T/J exits 1 with stderr exactly
# "amped-run: MESSAGE". J starts as a copy of amped-run's files ($T/one),
# then one file is changed.
init_reset() {
    for f in mode1 mode2 mode3 lambda; do cp "$T/one.$f.mat" "$T/J.$f.mat"; done
}
init_says() {
    run "$AMPED_RUN" -q -t 1 -r 3 --iters 1 --init "$T/J" "$T/g.amp"
    printf 'amped-run: %s\n' "$2" > "$T/want"
    if test "$RUN_RC" = 1 && cmp -s "$T/want" "$RUN_ERR"; then
        pass "$1"
    else
        fail "$1"
        diag "expected: amped-run: $2"
        diag_run
    fi
    init_reset
}
init_reset
awk 'NR == 9 { $0 = $1 " " $2 } { print }' "$T/one.mode2.mat" > "$T/J.mode2.mat"
init_says "--init: a row of 2 values at rank 3" "$T/J.mode2.mat:9: expected 3 values, found 2: these factors look to be of rank 2; give -r 2 to start from them"
awk 'NR == 9 { $0 = $0 " 1" } { print }' "$T/one.mode2.mat" > "$T/J.mode2.mat"
init_says "--init: a row of 4 values" "$T/J.mode2.mat:9: expected 3 values, found 4: these factors look to be of rank 4; give -r 4 to start from them"
awk 'NR == 12 { $2 = "1e309" } { print }' "$T/one.mode2.mat" > "$T/J.mode2.mat"
init_says "--init: a value beyond a double" "$T/J.mode2.mat:12: value 2 is out of range"
awk 'NR == 11 { $3 = "-inf" } { print }' "$T/one.mode3.mat" > "$T/J.mode3.mat"
init_says "--init: an infinite value" "$T/J.mode3.mat:11: value 3 is not a finite number"
awk 'NR == 5 { $1 = "1,5" } { print }' "$T/one.mode1.mat" > "$T/J.mode1.mat"
init_says "--init: a decimal comma" "$T/J.mode1.mat:5: value 2 is not a number"
sed '$d' "$T/one.mode3.mat" > "$T/J.mode3.mat"
init_says "--init: a row short" "$T/J.mode3.mat: 10 rows, expected 11 (one per index of the mode)"
echo >> "$T/J.mode1.mat"
init_says "--init: a blank line after the last row" "$T/J.mode1.mat:14: more than 13 rows"
echo 1 >> "$T/J.lambda.mat"
init_says "--init: lambda a value long" "$T/J.lambda.mat:4: more than 3 rows"
rm "$T/J.mode2.mat"
init_says "--init: a mode's file missing" "$T/J.mode2.mat: No such file or directory"

done_testing
