#!/bin/sh
# Real tensors from $AMP_TEST_DATA (default: ../shared/data beside the source
# tree): amped-prep's statistics against an independent awk computation of
# the modes, entries, largest index per mode, duplicates, value range,
# explicit zeros and norm; a .bin round trip; and the data's SHA256SUMS.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP" "$AMPED_RUN"
need_real_data
set -- "$AMP_TEST_DATA"/*.tns

# ---- checksums first: a damaged file would make the rest meaningless -----
if ! test -f "$AMP_TEST_DATA/SHA256SUMS"; then
    skip "SHA256SUMS verifies" "no SHA256SUMS in $AMP_TEST_DATA"
elif ! command -v sha256sum >/dev/null 2>&1; then
    skip "SHA256SUMS verifies" "sha256sum is not installed"
else
    check "SHA256SUMS verifies (sha256sum -c)" sh -c "cd '$AMP_TEST_DATA' && sha256sum -c SHA256SUMS"
fi

# The reference: one pass of awk over the text. Prints
#   modes N / entries N / dims D1 x D2 ... / duplicates N / min V / max V /
#   zeros N / sumsq V
# The dims are the largest index per mode, kept as decimal strings: awk's
# doubles would round indices above 2^53.
reference() {
    awk '
    function bigger(a, b) {   # compare non-negative decimal strings
        sub(/^0+/, "", a); sub(/^0+/, "", b)
        if (length(a) != length(b)) return length(a) > length(b)
        return a > b
    }
    /^[ \t\r]*(#|$)/ { next }
    {
        sub(/\r$/, "")
        if (!nf) {
            nf = NF
            for (m = 1; m < nf; m++) max[m] = "0"
        }
        if (NF != nf) { printf "bad line %d: %d fields, expected %d\n", NR, NF, nf; exit 1 }
        key = $1
        for (m = 2; m < nf; m++) key = key SUBSEP $m
        if (key in seen) dups++
        seen[key] = 1
        for (m = 1; m < nf; m++) {
            if (bigger($m, max[m])) max[m] = $m
            if ($m ~ /^0+$/) zerobased = 1
        }
        v = $nf + 0
        if (!n || v < lo) lo = v
        if (!n || v > hi) hi = v
        if (v == 0) zeros++
        sumsq += v * v
        n++
    }
    END {
        printf "modes %d\nentries %d\ndims", nf - 1, n
        # A 0 index makes the file 0-based: a dimension is then the largest
        # index + 1 (computed in doubles: exact below 2^53).
        for (m = 1; m < nf; m++) {
            d = max[m]; sub(/^0+/, "", d)
            if (zerobased) d = sprintf("%.0f", d + 1)
            printf "%s%s", (m > 1 ? " x " : " "), d
        }
        printf "\nduplicates %d\nmin %.6g\nmax %.6g\nzeros %d\nsumsq %.17g\n", dups, lo, hi, zeros, sumsq
    }' "$1"
}

# field FILE KEY: the value after KEY in reference output.
field() {
    sed -n "s/^$2 //p" "$1"
}

# norm_close DESCRIPTION PRINTED SUMSQ: PRINTED (amped-prep's %.6g norm)
# equals sqrt(SUMSQ) within relative 1e-9 plus half a unit in the 6th
# significant digit, the most that %.6g can lose; PRINTED or SUMSQ empty
# or not a number fails.
norm_close() {
    # Numbers first: a norm printed as nan passed (mawk: nan <= tol), and
    # an empty one compared as 0.
    if is_number "$2" && is_number "$3" && awk -v p="$2" -v s="$3" 'BEGIN {
            r = sqrt(s); a = r < 0 ? -r : r
            e = 0; while (a >= 10) { a /= 10; e++ } ; while (a > 0 && a < 1) { a *= 10; e-- }
            tol = 1e-9 * (r < 0 ? -r : r) + 0.5 * 10 ^ (e - 5)
            d = p - r; if (d < 0) d = -d
            exit !(d <= tol) }'; then
        pass "$1"
    else
        fail "$1"
        diag "amped-prep printed norm $2, awk computes sqrt($3) = $(awk -v s="$3" 'BEGIN { printf "%.12g", sqrt(s) }')"
    fi
}

for f in "$@"; do
    name=${f##*/}
    if ! reference "$f" >"$T/ref" 2>"$T/ref.err"; then
        fail "$name: awk reference computed"
        diag_file "awk" "$T/ref"
        continue
    fi

    # Entries: with --duplicates keep every non-comment line is a nonzero.
    run "$AMPED_PREP" --stats --duplicates keep "$f"
    check_status "$name: read with --duplicates keep" 0
    stats_of "$RUN_OUT" >"$T/keep"
    # Whole lines: as substrings, a count of 61305 passed for 613050.
    check_line "$name: modes" "$RUN_OUT" "modes:      $(field "$T/ref" modes)"
    check_line "$name: nonzeros (entries, duplicates kept) = non-comment lines" "$RUN_OUT" \
        "nonzeros:   $(field "$T/ref" entries)"
    check_line "$name: dims = largest index per mode" "$RUN_OUT" "dims:       $(field "$T/ref" dims)"
    check_line "$name: duplicates" "$RUN_OUT" "duplicates: $(field "$T/ref" duplicates)"
    check_contains "$name: value range and explicit zeros" "$RUN_OUT" \
        "values:     min $(field "$T/ref" min), max $(field "$T/ref" max), norm "
    check_contains "$name: explicit zeros" "$RUN_OUT" "explicit zeros $(field "$T/ref" zeros),"
    norm=$(sed -n 's/^values:.*, norm \([^,]*\),.*/\1/p' "$RUN_OUT")
    norm_close "$name: norm = sqrt(sum of squares) (awk)" "$norm" "$(field "$T/ref" sumsq)"

    # Default (sum): entries - duplicates nonzeros remain.
    run "$AMPED_PREP" --stats "$f"
    check_status "$name: read with duplicates summed" 0
    stats_of "$RUN_OUT" >"$T/sum"
    entries=$(field "$T/ref" entries)
    dups=$(field "$T/ref" duplicates)
    check_line "$name: summed: nonzeros = entries - duplicates" "$RUN_OUT" \
        "nonzeros:   $((entries - dups))"

    # Thread count does not change anything.
    run "$AMPED_PREP" --stats -t 1 "$f"
    check_status "$name: read on 1 thread" 0
    stats_of "$RUN_OUT" >"$T/t1"
    check_same_stats "$name: -t 1 gives the same statistics" "$T/sum" "$T/t1"

    # A .bin round trip keeps everything (summed duplicates are not written
    # back, so that count is left out).
    sed '/^duplicates:/d' "$T/sum" >"$T/sum-nodup"
    run "$AMPED_PREP" -f -q -o "$T/rt.bin" "$f"
    check_status "$name: converts to .bin" 0
    run "$AMPED_PREP" --stats "$T/rt.bin"
    check_status "$name: its .bin reads" 0
    stats_of "$RUN_OUT" | sed '/^duplicates:/d' >"$T/bin"
    check_same_stats "$name: its .bin has the same statistics" "$T/sum-nodup" "$T/bin"
    run "$AMPED_PREP" -f -q -o "$T/rt.tns" "$T/rt.bin"
    check_status "$name: its .bin converts back to .tns" 0
    run "$AMPED_PREP" --stats "$T/rt.tns"
    check_status "$name: that .tns reads" 0
    stats_of "$RUN_OUT" | sed '/^duplicates:/d' >"$T/tns"
    check_same_stats "$name: .tns -> .bin -> .tns keeps the statistics" "$T/sum-nodup" "$T/tns"

    # The .amp file: written, verified, and its metadata matches the source.
    run "$AMPED_PREP" -f -q -o "$T/rt.amp" "$f"
    check_status "$name: converts to .amp" 0
    run "$AMPED_RUN" --verify "$T/rt.amp"
    check_status "$name: its .amp verifies (every checksum and index)" 0
    run "$AMPED_RUN" --info "$T/rt.amp"
    check_status "$name: --info on its .amp" 0
    check_contains "$name: .amp holds every nonzero" "$RUN_OUT" \
        "modes, $((entries - dups)) nonzeros,"
    check_line "$name: .amp keeps the dimensions" "$RUN_OUT" "dims:       $(field "$T/ref" dims)"
    run "$AMPED_PREP" -f -q -t 1 -o "$T/t1.amp" "$f"
    check_status "$name: converts to .amp on 1 thread" 0
    check "$name: .amp is byte-identical on 1 thread and all" cmp "$T/rt.amp" "$T/t1.amp"
done

done_testing
