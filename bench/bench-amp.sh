#!/bin/sh
# The .amp format's costs on cpu20m and the real tensors: prep time, file
# size, compression ratio and bytes per nonzero per Zstandard level, and
# how fast chunks are read, verified and decompressed on 1..N threads (the
# loader's CPU side, page cache warm).
#
# Usage: bench/bench-amp.sh                  (from the build directory)
# Env:   AMP_BENCH_DIR   where tensors are kept (default: bench/data)
#        AMP_BASELINES   the peers' folder (default: ../shared/baselines)
#        AMP_TEST_DATA   the real tensors (default: ../shared/data)
#        AMP_LEVELS      levels to compare (default: 0 1 3)
#        AMP_THREADS     thread counts for the read sweep (default: 1 2 4 ... nproc)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
readb="$build/bench/amp-read-bench"
real=${AMP_TEST_DATA:-$src/../shared/data}
levels=${AMP_LEVELS:-0 1 3}
chunks=${AMP_CHUNK_NNZ:-262144 4194304}
need_built "$prep" "$run" "$readb"

need_cpu20m
sweep_threads

echo "## .amp on $(hostname), $ncpu CPUs, $(date -u +%Y-%m-%d)"
echo
echo "### cpu20m: prep and size per level"
echo
echo "| level | prep s (all threads) | file MiB | ratio (chunks) | bytes/nnz/copy |"
echo "|---:|---:|---:|---:|---:|"
cat "$tns" >/dev/null
for lv in $levels; do
    out="$data/cpu20m-l$lv.amp"
    start=$(date +%s.%N)
    "$prep" -q --level="$lv" -o "$out" "$tns"
    end=$(date +%s.%N)
    "$run" --info "$out" >"$data/info"
    awk -v lv="$lv" -v s="$start" -v e="$end" -v size="$(wc -c <"$out")" '
        /^compressed:/ { r = $0; sub(/.*\(/, "", r); sub(/x\).*/, "", r);
                         b = $0; sub(/.*\), /, "", b); sub(/ bytes.*/, "", b) }
        END { printf "| %s | %.2f | %.1f | %s | %s |\n", lv, e - s, size / 1048576, r, b }' \
        "$data/info"
done
echo
for lv in $levels; do
    echo "### cpu20m, level $lv: read + verify + decompress"
    echo
    # shellcheck disable=SC2086
    "$readb" "$data/cpu20m-l$lv.amp" $threads
    echo
    if [ "$lv" != 0 ]; then
        echo "Byte planes left for the consumer (a GPU) to rebuild:"
        echo
        # shellcheck disable=SC2086
        "$readb" --planes "$data/cpu20m-l$lv.amp" $threads
        echo
    fi
done

echo "### cpu20m: chunk size at the default level"
echo
for c in $chunks; do
    "$prep" -q --chunk-nnz="$c" -o "$data/cpu20m-c$c.amp" "$tns"
    echo "--chunk-nnz=$c:"
    echo
    "$readb" "$data/cpu20m-c$c.amp" 1 "$ncpu"
    echo
done

echo "### Real tensors at the default level"
echo
echo "| tensor | nonzeros | modes | file KiB | ratio (all sections) | bytes/nnz/copy |"
echo "|---|---:|---:|---:|---:|---:|"
for f in "$real"/*.tns; do
    [ -f "$f" ] || continue
    name=${f##*/}
    "$prep" -q -o "$data/real.amp" "$f"
    "$run" --info "$data/real.amp" | awk -v n="$name" -v size="$(wc -c <"$data/real.amp")" '
        /^tensor:/ { m = $2; z = $4 }
        /^compressed:/ { r = $0; sub(/.*\(/, "", r); sub(/x\).*/, "", r);
                         b = $0; sub(/.*\), /, "", b); sub(/ bytes.*/, "", b) }
        END { printf "| %s | %s | %s | %.1f | %s | %s |\n", n, z, m, size / 1024, r, b }'
done
