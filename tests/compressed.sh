#!/bin/sh
# gzip and Zstandard input: the same statistics as the plain file, from a
# file and from a pipe, concatenated members and frames, and clear failures
# on truncated or corrupt streams. Cases for a missing compressor are skipped.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP" "$AMPED_GEN"
have_gzip=no
have_zstd=no
command -v gzip >/dev/null 2>&1 && have_gzip=yes
command -v zstd >/dev/null 2>&1 && have_zstd=yes
test $have_gzip = yes || test $have_zstd = yes || skip_all "neither gzip nor zstd is installed"

# Inputs: a small one with comments and CRLF, and one over 1 MiB, larger than
# the decoders' input buffer, so that several refills are needed.
printf '# small\r\n1 1 1 1.5\r\n\r\n2 3 4 -2.5\r\n# end\r\n3 1 2 4\r\n' >"$T/small.tns"
"$AMPED_GEN" -o "$T/big.tns" --nnz 60000 --dims 300,400,500 --seed 11 >/dev/null 2>&1 ||
    { echo "Bail out! amped-gen failed"; exit 1; }
cat >"$T/bad.tns" <<'EOF'
# bad on line 4
1 1 1 1
2 2 2 2
3 3 x 3
EOF
# A binary file, to read compressed as NAME.bin.gz / NAME.bin.zst.
run "$AMPED_PREP" -q -o "$T/small.bin" "$T/small.tns"
check_status "small.tns converts to small.bin" 0

# reference FILE: statistics of a plain file, into $T/ref.
reference() {
    run "$AMPED_PREP" --stats "$1"
    if test "$RUN_RC" != 0; then
        fail "reading plain ${1##*/} for reference"
        diag_run
        return 1
    fi
    stats_of "$RUN_OUT" >"$T/ref"
}

# same_as_ref DESCRIPTION: the last run succeeded with the reference statistics.
same_as_ref() {
    if test "$RUN_RC" != 0; then
        fail "$1"
        diag_run
        return
    fi
    stats_of "$RUN_OUT" >"$T/got"
    check_same_stats "$1" "$T/ref" "$T/got"
}

# fails_clearly DESCRIPTION NAME: exit 1, nothing on stdout, and a message
# naming NAME and saying "truncated" or "corrupt".
fails_clearly() {
    if test "$RUN_RC" = 1 && ! test -s "$RUN_OUT" && grep -F -e "$2" "$RUN_ERR" >/dev/null &&
        grep -E 'truncated|corrupt' "$RUN_ERR" >/dev/null; then
        pass "$1"
    else
        fail "$1"
        diag "expected exit status 1 and a message naming $2 with 'truncated' or 'corrupt'"
        diag_run
    fi
}

# size FILE
size() {
    wc -c <"$1" | tr -d ' '
}

# cut_bytes FILE N OUT: the first N bytes of FILE.
cut_bytes() {
    dd if="$1" of="$3" bs="$2" count=1 2>/dev/null
}

# zero_tail FILE N OUT: FILE with its last N bytes replaced by zero bytes.
zero_tail() {
    _s=$(size "$1")
    cut_bytes "$1" $((_s - $2)) "$3"
    dd if=/dev/zero bs=1 count="$2" 2>/dev/null >>"$3"
}

# squeezed DESCRIPTION STATUS: the compressor's exit status, checked: one
# that failed would leave an empty or cut stream that later cases misread.
squeezed() {
    if test "$2" = 0; then
        pass "$1"
    else
        fail "$1"
        diag "the compressor exited with status $2"
    fi
}

# ---- one compressor -----------------------------------------------------------
# compressor_cases NAME EXT COMPRESS-CMD (reads stdin, writes stdout)
compressor_cases() {
    tool=$1
    ext=$2
    shift 2
    for input in small big; do
        plain=$T/$input.tns
        z=$T/$input.tns.$ext
        "$@" <"$plain" >"$z"
        squeezed "$tool compresses $input.tns" $?
        reference "$plain" || continue
        run "$AMPED_PREP" --stats "$z"
        same_as_ref "$tool: $input.tns.$ext gives the statistics of $input.tns"
        check_contains "$tool: $input.tns.$ext is reported as $tool" "$RUN_OUT" "(FROSTT text, $tool, "
        check_contains "$tool: $input.tns.$ext: size is the decompressed one" "$RUN_OUT" \
            "$tool, $(size "$plain") bytes"
        run_stdin "$z" "$AMPED_PREP" --stats -
        same_as_ref "$tool: $input.tns.$ext on a pipe gives the same statistics"
        check_contains "$tool: on a pipe, still recognised" "$RUN_OUT" "(standard input) (FROSTT text, $tool, "
        cp "$z" "$T/$input-noext"
        run "$AMPED_PREP" --stats "$T/$input-noext"
        same_as_ref "$tool: recognised by content, not by name"
    done

    # Concatenation: two members/frames are one stream, as for `$tool -d`.
    # Split at a line boundary and, separately, inside a line.
    reference "$T/big.tns" || return
    head -n 20000 "$T/big.tns" | "$@" >"$T/cat-lines.$ext" &&
        tail -n +20001 "$T/big.tns" | "$@" >>"$T/cat-lines.$ext"
    squeezed "$tool compresses big.tns in two streams split at a line end" $?
    run "$AMPED_PREP" --stats "$T/cat-lines.$ext"
    same_as_ref "$tool: concatenated ${tool} streams split at a line end"
    half=$(( $(size "$T/big.tns") / 2 + 3 ))
    cut_bytes "$T/big.tns" "$half" "$T/part1"
    tail -c +$((half + 1)) "$T/big.tns" >"$T/part2"
    { "$@" <"$T/part1" && "$@" <"$T/part2"; } >"$T/cat-mid.$ext"
    squeezed "$tool compresses big.tns in two streams split inside a line" $?
    run "$AMPED_PREP" --stats "$T/cat-mid.$ext"
    same_as_ref "$tool: concatenated ${tool} streams split inside a line"
    run_stdin "$T/cat-mid.$ext" "$AMPED_PREP" --stats -
    same_as_ref "$tool: concatenated ${tool} streams on a pipe"
    # Three streams, the middle one empty.
    { "$@" <"$T/part1" && "$@" </dev/null && "$@" <"$T/part2"; } >"$T/cat-empty.$ext"
    squeezed "$tool compresses three streams, the middle one empty" $?
    run "$AMPED_PREP" --stats "$T/cat-empty.$ext"
    same_as_ref "$tool: an empty ${tool} stream between two others"

    # Binary tensors, compressed.
    reference "$T/small.bin" || return
    "$@" <"$T/small.bin" >"$T/small.bin.$ext"
    squeezed "$tool compresses small.bin" $?
    run "$AMPED_PREP" --stats "$T/small.bin.$ext"
    same_as_ref "$tool: small.bin.$ext is read as FROSTT binary"
    check_contains "$tool: small.bin.$ext reported as binary and $tool" "$RUN_OUT" "(FROSTT binary, $tool, "

    # Errors inside the data keep their line numbers.
    "$@" <"$T/bad.tns" >"$T/bad.tns.$ext"
    squeezed "$tool compresses bad.tns" $?
    run "$AMPED_PREP" --stats "$T/bad.tns.$ext"
    check_status "$tool: a bad line in bad.tns.$ext exits 1" 1
    check_contains "$tool: the bad line is named" "$RUN_ERR" "$T/bad.tns.$ext:4: field 3:"

    # An empty but valid stream.
    "$@" </dev/null >"$T/empty.tns.$ext"
    squeezed "$tool compresses an empty input" $?
    run "$AMPED_PREP" --stats "$T/empty.tns.$ext"
    check_status "$tool: an empty stream exits 1" 1
    check_contains "$tool: an empty stream: no nonzeros" "$RUN_ERR" "$T/empty.tns.$ext: no nonzeros (empty input)"

    # Truncated streams, at several places, as a file and on a pipe.
    z=$T/big.tns.$ext
    n=$(size "$z")
    # (At least the 4 bytes that identify either format.)
    for keep in 4 10 100 $((n / 2)) $((n - 4)) $((n - 1)); do
        cut_bytes "$z" "$keep" "$T/trunc-$keep.tns.$ext"
        run "$AMPED_PREP" --stats "$T/trunc-$keep.tns.$ext"
        fails_clearly "$tool: truncated to $keep of $n bytes: exit 1, named, explained" "trunc-$keep.tns.$ext"
    done
    cut_bytes "$z" $((n / 2)) "$T/trunc-pipe.$ext"
    run_stdin "$T/trunc-pipe.$ext" "$AMPED_PREP" --stats -
    fails_clearly "$tool: truncated on a pipe: exit 1, explained" "(standard input)"
    "$@" <"$T/small.bin" >"$T/sb.$ext"
    squeezed "$tool compresses small.bin again" $?
    cut_bytes "$T/sb.$ext" $(( $(size "$T/sb.$ext") - 1 )) "$T/trunc-bin.bin.$ext"
    run "$AMPED_PREP" --stats "$T/trunc-bin.bin.$ext"
    fails_clearly "$tool: a truncated .bin.$ext: exit 1, explained" "trunc-bin.bin.$ext"
    # Compressed bytes after a complete stream that are not a stream.
    cp "$T/small.tns.$ext" "$T/junk.tns.$ext"
    printf 'this is not compressed data\n' >>"$T/junk.tns.$ext"
    run "$AMPED_PREP" --stats "$T/junk.tns.$ext"
    check_status "$tool: junk after the stream exits 1" 1
    check_contains "$tool: junk after the stream: file named" "$RUN_ERR" "junk.tns.$ext"
}

if test $have_gzip = yes; then
    compressor_cases gzip gz gzip -c -n
    # The trailer holds the CRC-32 and the size: zeroing it must be caught.
    zero_tail "$T/big.tns.gz" 8 "$T/crc.tns.gz"
    run "$AMPED_PREP" --stats "$T/crc.tns.gz"
    fails_clearly "gzip: a wrong CRC in the trailer: exit 1, named, explained" "crc.tns.gz"
else
    skip "gzip cases" "gzip is not installed"
fi

if test $have_zstd = yes; then
    compressor_cases zstd zst zstd -q -c --check
    # The frame ends with a 4-byte checksum of the content (--check).
    zero_tail "$T/big.tns.zst" 4 "$T/crc.tns.zst"
    run "$AMPED_PREP" --stats "$T/crc.tns.zst"
    fails_clearly "zstd: a wrong content checksum: exit 1, named, explained" "crc.tns.zst"
    # A multi-threaded, long-window stream is still one stream.
    zstd -q -c -T2 -19 --long=27 <"$T/big.tns" >"$T/long.tns.zst" 2>/dev/null
    if test -s "$T/long.tns.zst"; then
        reference "$T/big.tns" &&
            { run "$AMPED_PREP" --stats "$T/long.tns.zst"; same_as_ref "zstd: --long=27 -19 stream (128 MiB window)"; }
    else
        skip "zstd: --long=27 stream" "this zstd cannot write it"
    fi
else
    skip "zstd cases" "zstd is not installed"
fi

done_testing
