#!/bin/sh
# amped-prep's messages that quote the data (file and line or byte,
# coordinates, indices, values), checked for their whole text: in
# --index-base 0, 1 and auto, for .tns and .bin (4- and 8-byte indices),
# and at lines far into a file that is read in many blocks by several
# threads. The corpus (tests/files) checks a part of a message per bad
# file; messages.sh the --dims cases of issue 27.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP"

# says WHAT 'ARGS' FILE MESSAGE: amped-prep --stats ARGS FILE exits 1 with
# stderr exactly "amped-prep: MESSAGE" and nothing on stdout.
says() {
    _what=$1 _args=$2 _file=$3 _msg=$4
    eval "set -- $_args"
    run "$AMPED_PREP" --stats "$@" "$_file"
    printf 'amped-prep: %s\n' "$_msg" > "$T/want"
    if test "$RUN_RC" = 1 && cmp -s "$T/want" "$RUN_ERR" && ! test -s "$RUN_OUT"; then
        pass "$_what"
    else
        fail "$_what"
        diag "expected: amped-prep: $_msg"
        diag_run
    fi
}

# ---- .tns: an index beyond --dims ------------------------------------------------
# 1-based: line 3 is the first beyond 4,4,4 (mode 2, 5); line 5 too (mode 1).
printf '1 1 1 1.0\n4 4 4 2.0\n2 5 1 3.0\n3 3 3 4.0\n5 1 1 5.0\n' > "$T/d1.tns"
# 0-based: the same with 1 less, and a zero, so auto reads it as 0-based.
printf '0 0 0 1.0\n3 3 3 2.0\n1 4 0 3.0\n2 2 2 4.0\n4 0 0 5.0\n' > "$T/d0.tns"
for base in 1 auto; do
    says "--index-base $base: the first line beyond --dims, its index as written" \
        "--index-base $base --dims 4,4,4" "$T/d1.tns" \
        "$T/d1.tns:3: index 5 in mode 2 exceeds the given dimension 4"
done
for base in 0 auto; do
    says "0-based, --index-base $base: the first line beyond --dims, its index as written" \
        "--index-base $base --dims 4,4,4" "$T/d0.tns" \
        "$T/d0.tns:3: index 4 in mode 2 exceeds the given dimension 4"
done
# auto: line 2's 4 fits 4 if the file is 1-based, and is beyond it once a
# zero (line 4) makes it 0-based.
printf '1 1 1 1.0\n4 1 1 2.0\n2 2 2 3.0\n0 1 1 4.0\n' > "$T/da.tns"
says "auto: an index that fits base 1 but not base 0, once a later zero decides" \
    "--dims 4,4,4" "$T/da.tns" "$T/da.tns:2: index 4 in mode 1 exceeds the given dimension 4"
says "... and --index-base 1 names the zero instead" "--index-base 1 --dims 4,4,4" "$T/da.tns" \
    "$T/da.tns:4: index 0 in mode 1, but the file is 1-based (use --index-base 0 if it is 0-based)"

# ---- .tns: a zero index in base 1 ---------------------------------------------------
printf '1 1 1 1.0\n2 2 2 2.0\n3 3 3 3.0\n1 2 0 4.0\n2 0 1 5.0\n' > "$T/z.tns"
says "--index-base 1: the first zero, its line and mode" "--index-base 1" "$T/z.tns" \
    "$T/z.tns:4: index 0 in mode 3, but the file is 1-based (use --index-base 0 if it is 0-based)"
run "$AMPED_PREP" --stats "$T/z.tns"
check_status "... auto reads the same file as 0-based" 0
check_contains "... and says so" "$RUN_OUT" "0-based"

# ---- .tns: values, fields, indices ------------------------------------------------
printf '1 1 1 1.0\n2 2 2 abc\n' > "$T/v1.tns"
printf '1 1 1 1.0\n2 2 2 2\n3 3 3 -nan\n' > "$T/v2.tns"
printf '1 1 1 1.0\n2 2 2 1e999\n' > "$T/v3.tns"
printf '1 1 1 1.0\n2 2 2 Infinity\n' > "$T/v4.tns"
printf '1 1 1 1.0\n2 2 2 2.0\n1 2 3\n' > "$T/f1.tns"
printf '1 1 1 1.0\n2 2 2 2.0 7\n' > "$T/f2.tns"
printf '0 1 1 1.0\n2 -1 2 2.0\n' > "$T/n.tns"
printf '0 1 1 1.0\n2 x 2 2.0\n' > "$T/x.tns"
for base in 0 1 auto; do
    says "--index-base $base: a value that is not a number" "--index-base $base" "$T/v1.tns" \
        "$T/v1.tns:2: field 4: value 'abc' is not a number"
    says "--index-base $base: NaN" "--index-base $base" "$T/v2.tns" \
        "$T/v2.tns:3: field 4: value '-nan' is not finite (NaN and infinity are not allowed)"
    says "--index-base $base: beyond a double" "--index-base $base" "$T/v3.tns" \
        "$T/v3.tns:2: field 4: value '1e999' is out of the range of a double"
    says "--index-base $base: infinity" "--index-base $base" "$T/v4.tns" \
        "$T/v4.tns:2: field 4: value 'Infinity' is not finite (NaN and infinity are not allowed)"
    says "--index-base $base: too few fields" "--index-base $base" "$T/f1.tns" \
        "$T/f1.tns:3: expected 4 fields (3 indices and a value), found 3"
    says "--index-base $base: too many fields" "--index-base $base" "$T/f2.tns" \
        "$T/f2.tns:2: expected 4 fields (3 indices and a value), found 5"
    says "--index-base $base: a negative index" "--index-base $base" "$T/n.tns" \
        "$T/n.tns:2: field 2: negative index '-1'"
    says "--index-base $base: an index that is not a number" "--index-base $base" "$T/x.tns" \
        "$T/x.tns:2: field 2: 'x' is not a non-negative integer index"
done

# ---- .tns: --duplicates error, the coordinates in the file's own base --------------
printf '1 1 1 1.0\n2 3 1 2.0\n3 3 3 3.0\n1 2 2 4.0\n2 3 1 5.0\n3 3 3 6.0\n' > "$T/u1.tns"
printf '0 0 0 1.0\n1 2 0 2.0\n2 2 2 3.0\n0 1 1 4.0\n1 2 0 5.0\n2 2 2 6.0\n' > "$T/u0.tns"
for base in 1 auto; do
    says "--index-base $base --duplicates error: the first pair, 1-based coordinates" \
        "--index-base $base --duplicates error" "$T/u1.tns" \
        "$T/u1.tns: 2 duplicate coordinates; the first is (2, 3, 1) at nonzeros 2 and 5 (use --duplicates sum or keep)"
done
for base in 0 auto; do
    says "0-based, --index-base $base --duplicates error: 0-based coordinates" \
        "--index-base $base --duplicates=error" "$T/u0.tns" \
        "$T/u0.tns: 2 duplicate coordinates; the first is (1, 2, 0) at nonzeros 2 and 5 (use --duplicates sum or keep)"
done

# ---- .tns: line numbers far into a file read in blocks by two threads ----------------
# 300000 lines (about 5 MB), a comment or a blank line every 1000 (so
# lines and nonzeros differ); the bad ones far in, in later blocks.
awk 'BEGIN { for (i = 1; i <= 300000; i++)
                 if (i % 1000 == 500) print (i % 2000 == 500 ? "# a comment" : "")
                 else printf "%d %d %d %d.5\n", i % 97 + 1, i % 89 + 1, i % 83 + 1, i % 7 }' \
    > "$T/big.tns"
awk 'NR == 287001 { $4 = "1.2.3" } NR == 299999 { $4 = "x" } { print }' "$T/big.tns" > "$T/bigv.tns"
says "a bad value on line 287001 of 300000, two threads" "-t 2" "$T/bigv.tns" \
    "$T/bigv.tns:287001: field 4: value '1.2.3' is not a number"
awk 'NR == 150001 { $2 = 0 } NR == 250001 { $1 = 0 } { print }' "$T/big.tns" > "$T/bigz.tns"
says "--index-base 1: the first zero on line 150001, two threads" "-t 2 --index-base 1" "$T/bigz.tns" \
    "$T/bigz.tns:150001: index 0 in mode 2, but the file is 1-based (use --index-base 0 if it is 0-based)"
awk 'NR == 200002 { $3 = 84 } NR == 260000 { $1 = 98 } { print }' "$T/big.tns" > "$T/bigd.tns"
says "--dims: the first line beyond, 200002, two threads" "-t 2 --dims 97,89,83" "$T/bigd.tns" \
    "$T/bigd.tns:200002: index 84 in mode 3 exceeds the given dimension 83"
awk 'NR == 222222 { print $1, $2, $3 } NR != 222222 { print }' "$T/big.tns" > "$T/bigf.tns"
says "a missing field on line 222222, two threads" "-t 2" "$T/bigf.tns" \
    "$T/bigf.tns:222222: expected 4 fields (3 indices and a value), found 3"

# ---- .bin: byte offsets ----------------------------------------------------------------
# patch FILE OFFSET HEX...: write the bytes (two hex digits each) at OFFSET.
patch() {
    _f=$1 _o=$2
    shift 2
    _b=
    for _h in "$@"; do _b="$_b\\$(printf '%03o' "0x$_h")"; done
    printf "$_b" | dd of="$_f" bs=1 seek="$_o" conv=notrunc 2>/dev/null
}
# 6 nonzeros of 3 modes, 4-byte indices: values from byte 40, 8 each; mode
# m's indices from 40 + 48 + (m - 1) 24, 4 each.
printf '1 1 1 1.0\n2 3 1 2.0\n3 3 3 3.0\n1 2 2 4.0\n2 1 3 5.0\n3 2 1 6.0\n' > "$T/b.tns"
run "$AMPED_PREP" -q -o "$T/b.bin" "$T/b.tns"
test "$RUN_RC" = 0 || { diag_run; echo "Bail out! amped-prep -o b.bin failed"; exit 1; }
cp "$T/b.bin" "$T/inf.bin"
patch "$T/inf.bin" $((40 + 3 * 8)) 00 00 00 00 00 00 f0 7f
says ".bin: an infinite value, its byte and nonzero" "" "$T/inf.bin" \
    "$T/inf.bin: byte 64: value of nonzero 4 is not finite (inf)"
cp "$T/b.bin" "$T/nan.bin"
patch "$T/nan.bin" 40 00 00 00 00 00 00 f8 ff
says ".bin: a NaN, the first nonzero" "--index-base 0" "$T/nan.bin" \
    "$T/nan.bin: byte 40: value of nonzero 1 is not finite (-nan)"
cp "$T/b.bin" "$T/z.bin"
patch "$T/z.bin" $((88 + 24 + 4 * 4)) 00 00 00 00
for base in 1 auto; do
    says ".bin --index-base $base: a zero index, its byte, nonzero and mode" "--index-base $base" \
        "$T/z.bin" "$T/z.bin: byte 128: index 0 of nonzero 5 in mode 2 is outside 1..3"
done
run "$AMPED_PREP" --stats --index-base 0 --dims 4,4,4 "$T/z.bin"
check_status ".bin --index-base 0 --dims 4,4,4: the zero is an index" 0
says ".bin --index-base 0: the largest index is beyond" "--index-base 0" "$T/b.bin" \
    "$T/b.bin: byte 96: index 3 of nonzero 3 in mode 1 is outside 0..2 (read as 0-based)"
says ".bin --dims: an index beyond, 1-based" "--dims 3,2,3" "$T/b.bin" \
    "$T/b.bin: byte 116: index 3 of nonzero 2 in mode 2 is outside 1..2"
says ".bin --dims, --index-base 0" "--index-base 0 --dims 4,4,3" "$T/b.bin" \
    "$T/b.bin: byte 144: index 3 of nonzero 3 in mode 3 is outside 0..2 (read as 0-based)"
# --duplicates error on a .bin that keeps them (amped-prep --duplicates keep).
printf '1 1 1 1.0\n2 3 1 2.0\n3 3 3 3.0\n2 3 1 4.0\n' > "$T/bd.tns"
run "$AMPED_PREP" -q --duplicates keep -o "$T/bd.bin" "$T/bd.tns"
test "$RUN_RC" = 0 || { diag_run; echo "Bail out! amped-prep -o bd.bin failed"; exit 1; }
says ".bin --duplicates error: 1-based coordinates" "--duplicates error" "$T/bd.bin" \
    "$T/bd.bin: 1 duplicate coordinate; the first is (2, 3, 1) at nonzeros 2 and 4 (use --duplicates sum or keep)"
# 8-byte indices (an index past 2^32): dims from byte 28, 8 each, values
# from 52; mode m's indices from 52 + 3 * 8 + (m - 1) 24.
printf '1 1 1 1.0\n2 5000000000 1 2.0\n3 3 3 3.0\n' > "$T/w.tns"
run "$AMPED_PREP" -q -o "$T/w.bin" "$T/w.tns"
test "$RUN_RC" = 0 || { diag_run; echo "Bail out! amped-prep -o w.bin failed"; exit 1; }
says ".bin, 8-byte indices: --dims, the byte of the index" "--dims 3,4999999999,3" "$T/w.bin" \
    "$T/w.bin: byte 108: index 5000000000 of nonzero 2 in mode 2 is outside 1..4999999999"
cp "$T/w.bin" "$T/w0.bin"
patch "$T/w0.bin" $((76 + 48 + 16)) 00 00 00 00 00 00 00 00
says ".bin, 8-byte indices: a zero in mode 3" "" "$T/w0.bin" \
    "$T/w0.bin: byte 140: index 0 of nonzero 3 in mode 3 is outside 1..3"

done_testing
