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
close13() { check_close "$1 ($2, $3)" "$2" "$3" 1e-13; }
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

# ---- amped-run --init: every form amped-run -o writes -----------------------------
# A tensor with empty slices in modes 1 and 2 (even indices of mode 1,
# 9 to 11 of mode 2), so that --rows nonempty leaves rows out. Each form
# written after one iteration and read back for one more gives the fit of
# two: within 1e-13 in f64 (as above). f32 files round the factors to
# floats, which the f32 run that wrote them keeps as doubles, so its
# continuation is within 1e-7 of a two-iteration f32 run (measured: 1e-9
# for a fit of 0.17; an unread or misplaced row moves it by 1e-2 or more).
i=0
while test $i -lt 600; do
    j=$((i * 7 % 17 + 1))
    test $j -ge 9 && j=$((j + 3))
    echo "$((i % 13 * 2 + 1)) $j $((i * 5 % 11 + 1)) $((i % 13 + i % 7 + 1)).$((i % 10))"
    i=$((i + 1))
done > "$T/h.tns"
run "$AMPED_PREP" -q -o "$T/h.amp" "$T/h.tns"
test "$RUN_RC" = 0 || { diag_run; echo "Bail out! amped-prep failed"; exit 1; }
# close LABEL A B TOL: two fits within TOL.
close() { check_close "$1 ($2, $3)" "$2" "$3" "$4"; }
for p in f64 f32; do
    run "$AMPED_RUN" -t 1 -r 3 --iters 2 --tol 0 --precision $p --json "$T/h2$p.json" "$T/h.amp"
    test "$RUN_RC" = 0 || { diag_run; echo "Bail out! amped-run failed"; exit 1; }
done
for form in "text all" "text nonempty" "npy all" "npy nonempty" "ktensor all"; do
    set -- $form
    for p in f64 f32; do
        tol=1e-13
        test $p = f32 && tol=1e-7
        ext=".mode*.$(test "$1" = npy && echo npy || echo mat)"
        test "$1" = ktensor && ext=.ktn
        pre="$T/w-$1-$2-$p"
        run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --precision $p --format "$1" --rows "$2" \
            -o "$pre" "$T/h.amp"
        test "$RUN_RC" = 0 || { diag_run; echo "Bail out! amped-run -o failed"; exit 1; }
        rm -f "$T/c.json"
        run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --precision $p --init "$pre" \
            --json "$T/c.json" "$T/h.amp"
        check_status "--init from --format $1 --rows $2 ($p): exit 0" 0
        check_contains "... the header names the files read" "$RUN_OUT" \
            "starting factors from $pre$ext"
        close "... its fit is the second iteration's, within $tol" \
            "$(fits "$T/c.json" | sed -n 1p)" "$(fits "$T/h2$p.json" | sed -n 2p)" $tol
    done
done

# The text of nonempty rows by hand: the rows it leaves out are zero, so
# a row of zeros written out is the same start; a row of the left-out
# index placed in the file is read (it changes the fit).
pre=$T/w-text-nonempty-f64
awk 'NR == 2 { print "2 0 0 0" } { print }' "$pre.mode1.mat" > "$T/z.mode1.mat"
for f in mode2 mode3 lambda; do cp "$pre.$f.mat" "$T/z.$f.mat"; done
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --init "$T/z" --json "$T/z.json" "$T/h.amp"
check_status "--init: nonempty rows with a zero row of an empty slice written out" 0
close "... the same fit" "$(fits "$T/z.json" | sed -n 1p)" "$(fits "$T/h2f64.json" | sed -n 2p)" 1e-13
awk 'NR == 3 { $2 = 0.5 } { print }' "$pre.mode2.mat" > "$T/z.mode2.mat"
rm -f "$T/z.json"
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --init "$T/z" --json "$T/z.json" "$T/h.amp"
check "... and a value changed in mode 2 changes it" awk -v a="$(fits "$T/z.json" | sed -n 1p)" \
    -v b="$(fits "$T/h2f64.json" | sed -n 2p)" "$AWK_NUM"' BEGIN {
        d = a - b; exit !(num(a) && (d > 1e-6 || d < -1e-6)) }'

# A nonempty index left out of the file is a zero row: the same start as
# the full layout with that row zeroed (index 3 of mode 2; mode 1's start
# is never used by ALS).
for f in mode1 mode3 lambda; do
    cp "$T/w-text-all-f64.$f.mat" "$T/za.$f.mat"
    cp "$pre.$f.mat" "$T/zn.$f.mat"
done
awk 'NR == 3 { $0 = "0 0 0" } { print }' "$T/w-text-all-f64.mode2.mat" > "$T/za.mode2.mat"
awk '$1 != 3' "$pre.mode2.mat" > "$T/zn.mode2.mat"
rm -f "$T/za.json" "$T/zn.json"
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --init "$T/za" --json "$T/za.json" "$T/h.amp"
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --init "$T/zn" --json "$T/zn.json" "$T/h.amp"
check_status "--init: nonempty rows with a nonempty index left out: exit 0" 0
close "... the fit of its row zeroed in the full layout" "$(fits "$T/zn.json" | sed -n 1p)" \
    "$(fits "$T/za.json" | sed -n 1p)" 1e-13

# A ktensor that pyttb's export_data writes (%.16e, 17 digits) from the
# one amped-run wrote: the same start.
PYTTB=${AMP_TEST_PYTHON:-python3}
if "$PYTTB" -c 'import pyttb' >/dev/null 2>&1; then
    run "$PYTTB" -c 'import sys, pyttb as ttb
ttb.export_data(ttb.import_data(sys.argv[1] + ".ktn"), sys.argv[2] + ".ktn")' \
        "$T/w-ktensor-all-f64" "$T/py"
    rm -f "$T/py.json"
    run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --init "$T/py" --json "$T/py.json" "$T/h.amp"
    check_status "--init from pyttb's export_data: exit 0" 0
    close "... the same fit" "$(fits "$T/py.json" | sed -n 1p)" \
        "$(fits "$T/h2f64.json" | sed -n 2p)" 1e-13
elif test "${CI:-}" = true; then
    fail "--init from pyttb's export_data: no pyttb in $PYTTB (CI=true needs it: .ci/run sets AMP_TEST_PYTHON)"
else
    skip "--init from pyttb's export_data" "no pyttb (AMP_TEST_PYTHON=python with pyttb to run it)"
fi

# ---- --init: what it refuses in the other forms -------------------------------------
# says LABEL MESSAGE ARGS...: amped-run -q -t 1 --iters 1 ARGS $T/h.amp
# exits 1 with stderr exactly "amped-run: MESSAGE".
says() {
    _label=$1 _msg=$2
    shift 2
    run "$AMPED_RUN" -q -t 1 --iters 1 "$@" "$T/h.amp"
    printf 'amped-run: %s\n' "$_msg" > "$T/want"
    if test "$RUN_RC" = 1 && cmp -s "$T/want" "$RUN_ERR"; then
        pass "$_label"
    else
        fail "$_label"
        diag "expected: amped-run: $_msg"
        diag_run
    fi
}
# K: a copy of a set (prefix $1) to change one file of, without its
# manifest (which would refuse any change first).
copy_set() {
    rm -f "$T"/K.*
    for _f in "$1".*; do
        case $_f in *.manifest) ;; *) cp "$_f" "$T/K${_f#"$1"}" ;; esac
    done
}
# patch FILE OFFSET TEXT: TEXT over the bytes of FILE at OFFSET.
patch() {
    printf '%s' "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
n64=$T/w-npy-all-f64
copy_set "$n64"
patch "$T/K.mode2.npy" 0 X
says "--init: an npy file without the magic" \
    "$T/K.mode2.npy: not a NumPy .npy file (it does not start with \\x93NUMPY)" -r 3 --init "$T/K"
copy_set "$n64"
patch "$T/K.mode2.npy" 6 "$(printf '\004')"
says "--init: an npy file of version 4.0" \
    "$T/K.mode2.npy: .npy version 4.0; amped reads 1.0, 2.0 and 3.0" -r 3 --init "$T/K"
copy_set "$n64"
patch "$T/K.mode2.npy" 10 "["
says "--init: an npy header that is not a dictionary" \
    "$T/K.mode2.npy: the .npy header is not a dictionary" -r 3 --init "$T/K"
copy_set "$n64"
patch "$T/K.mode2.npy" 21 "<i8"
says "--init: an npy file of integers" "$T/K.mode2.npy: data type '<i8'; expected '<f8' or '<f4'" \
    -r 3 --init "$T/K"
copy_set "$n64"
patch "$T/K.lambda.npy" 21 ">f8"
says "--init: a big-endian lambda" "$T/K.lambda.npy: data type '>f8'; expected '<f8' or '<f4'" \
    -r 3 --init "$T/K"
copy_set "$n64"
patch "$T/K.mode3.npy" 44 "True, "
says "--init: an npy file in Fortran order" \
    "$T/K.mode3.npy: in Fortran order; amped reads C order (fortran_order False), as it writes" \
    -r 3 --init "$T/K"
copy_set "$n64"
head -c -8 "$n64.mode1.npy" > "$T/K.mode1.npy"
says "--init: a truncated npy file" \
    "$T/K.mode1.npy: 720 bytes, where its header and shape (25, 3) of '<f8' make 728" \
    -r 3 --init "$T/K"
copy_set "$n64"
run "$AMPED_RUN" -q -t 1 -r 4 --iters 1 --format npy -o "$T/r4" "$T/h.amp"
cp "$T/r4.mode2.npy" "$T/K.mode2.npy"
says "--init: an npy factor of another rank" \
    "$T/K.mode2.npy: shape (20, 4), expected (20, 3): mode 2's indices, rank 3" -r 3 --init "$T/K"
copy_set "$n64"
cp "$T/r4.lambda.npy" "$T/K.lambda.npy"
says "--init: an npy lambda of another rank" "$T/K.lambda.npy: shape (4,), expected (3,): the rank" \
    -r 3 --init "$T/K"
# the index files: element 2 of mode 1's (0-based index 4) changed
nne=$T/w-npy-nonempty-f64
copy_set "$nne"
patch "$T/K.mode1.index.npy" $((128 + 16)) "$(printf '\031')"
says "--init: an npy index out of range" \
    "$T/K.mode1.index.npy: element [2] is 25, out of range (mode 1 has indices 0 to 24)" \
    -r 3 --init "$T/K"
copy_set "$nne"
patch "$T/K.mode1.index.npy" $((128 + 16)) "$(printf '\002')"
says "--init: an npy index repeated" "$T/K.mode1.index.npy: element [2] is 2, as element [1] is" \
    -r 3 --init "$T/K"
copy_set "$nne"
patch "$T/K.mode1.index.npy" $((128 + 16)) "$(printf '\001')"
says "--init: npy indices out of order" \
    "$T/K.mode1.index.npy: element [2] is 1, after 2: amped-run writes the indices in ascending order" \
    -r 3 --init "$T/K"
copy_set "$nne"
cp "$nne.mode3.index.npy" "$T/K.mode1.index.npy"
says "--init: an index file of fewer rows than its factor" \
    "$T/K.mode1.npy: shape (13, 3), expected (11, 3): the rows of its index file, rank 3" \
    -r 3 --init "$T/K"
# text, nonempty rows
tne=$T/w-text-nonempty-f64
copy_set "$tne"
awk 'NR == 13 { $1 = 26 } { print }' "$tne.mode1.mat" > "$T/K.mode1.mat"
says "--init: a nonempty-rows index out of range" \
    "$T/K.mode1.mat:13: index 26 is out of range (mode 1 has indices 1 to 25)" -r 3 --init "$T/K"
copy_set "$tne"
awk 'NR == 5 { $1 = 7 } { print }' "$tne.mode1.mat" > "$T/K.mode1.mat"
says "--init: a nonempty-rows index repeated" \
    "$T/K.mode1.mat:5: index 7 repeated (line 4 has it too)" -r 3 --init "$T/K"
copy_set "$tne"
awk 'NR == 5 { $1 = 2 } { print }' "$tne.mode1.mat" > "$T/K.mode1.mat"
says "--init: nonempty-rows indices out of order" \
    "$T/K.mode1.mat:5: index 2 after 7: amped-run writes the indices in ascending order" \
    -r 3 --init "$T/K"
copy_set "$tne"
awk 'NR == 5 { $1 = "x" } { print }' "$tne.mode1.mat" > "$T/K.mode1.mat"
says "--init: a nonempty-rows line without its index" \
    "$T/K.mode1.mat:5: expected an index (a whole number from 1) and 3 values, as the file's first line has" \
    -r 3 --init "$T/K"
# ktensor
kt=$T/w-ktensor-all-f64
run "$AMPED_RUN" -q -t 1 -r 4 --iters 1 --format ktensor -o "$T/r4k" "$T/h.amp"
says "--init: a ktensor of another rank" "$T/r4k.ktn:4: a ktensor of rank 4; the run's rank is 3 (-r)" \
    -r 3 --init "$T/r4k"
copy_set "$kt"
sed '3s/^25 20 11$/25 21 11/' "$kt.ktn" > "$T/K.ktn"
says "--init: a ktensor of other dimensions" \
    "$T/K.ktn:3: mode 2 has 21 indices in the ktensor, 20 in the tensor" -r 3 --init "$T/K"
copy_set "$kt"
sed '2s/^3$/4/' "$kt.ktn" > "$T/K.ktn"
says "--init: a ktensor of another number of modes" "$T/K.ktn:2: a ktensor of 4 modes; the tensor has 3" \
    -r 3 --init "$T/K"
copy_set "$kt"
sed '8s/^25 3$/24 3/' "$kt.ktn" > "$T/K.ktn"
says "--init: a ktensor matrix of other rows" "$T/K.ktn:8: mode 1's matrix is 24 x 3, expected 25 x 3" \
    -r 3 --init "$T/K"
copy_set "$kt"
sed '$d' "$kt.ktn" > "$T/K.ktn"
says "--init: a ktensor a row short" "$T/K.ktn: ends after line 69, before mode 3's 11 rows" \
    -r 3 --init "$T/K"
copy_set "$kt"
sed '1s/ktensor/tensor/' "$kt.ktn" > "$T/K.ktn"
says "--init: not a ktensor" "$T/K.ktn:1: expected 'ktensor': not a ktensor file" -r 3 --init "$T/K"

# ---- --init: which set of a prefix ------------------------------------------------
# Two forms under one prefix: the set its manifest lists, or refused.
run "$AMPED_RUN" -q -t 1 -r 3 --iters 1 --tol 0 -o "$T/two" "$T/h.amp"
run "$AMPED_RUN" -q -t 1 -r 3 --iters 1 --tol 0 --format npy -o "$T/two" "$T/h.amp"
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --init "$T/two" "$T/h.amp"
check_status "--init: text and npy sets, the manifest lists the npy: exit 0" 0
check_contains "... the npy set is read" "$RUN_OUT" "starting factors from $T/two.mode*.npy"
run "$AMPED_RUN" -q -t 1 -r 3 --iters 1 --tol 0 --format ktensor -o "$T/two" "$T/h.amp"
run "$AMPED_RUN" -t 1 -r 3 --iters 1 --tol 0 --init "$T/two" "$T/h.amp"
check_status "--init: and a ktensor (which has no manifest): exit 0" 0
check_contains "... the set the manifest lists is read" "$RUN_OUT" "starting factors from $T/two.mode*.npy"
rm "$T/two.manifest"
says "--init: several forms and no manifest: refused" \
    "$T/two: factor files of more than one form (text, npy, ktensor) and no manifest that lists one set: move the others away, or give each set its own prefix" \
    -r 3 --init "$T/two"
says "--init: no factor files under the prefix" \
    "$T/none: no starting factors: none of $T/none.mode1.mat, $T/none.mode1.npy and $T/none.ktn exists" \
    -r 3 --init "$T/none"
# The manifest checks an npy set as it checks text: a file of another run.
run "$AMPED_RUN" -q -t 1 -r 3 --iters 1 --seed 2 --format npy -o "$T/other" "$T/h.amp"
rm -f "$T"/M.*
for f in "$n64".*; do cp "$f" "$T/M${f#"$n64"}"; done
sed 's/ w-npy-all-f64\./ M./' "$n64.manifest" > "$T/M.manifest"
run "$AMPED_RUN" -q -t 1 -r 3 --iters 1 --init "$T/M" "$T/h.amp"
check_status "--init: an npy set under another name, its manifest renamed to match: exit 0" 0
cp "$T/other.mode2.npy" "$T/M.mode2.npy"
says "--init: an npy set with a file of another run" \
    "$T/M.mode2.npy: not the file of run $(sed -n 's/^run //p' "$T/M.manifest") that $T/M.manifest lists (its checksum differs): the set mixes the files of two runs, as a run stopped while they took their names leaves it; write the factors again" \
    -r 3 --init "$T/M"

done_testing
