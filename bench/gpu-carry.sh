#!/bin/sh
# Stage a CUDA build for a GPU machine that has the shared libraries but
# not libtool (the device tool's machines): the programs as real ELF files
# (libtool's .libs/ ones, not its wrapper scripts), libamped.so, the
# shared tensors and the baselines, laid out as a build tree, then packed
# into one archive to carry.
#
#   cd _build && sh ../bench/gpu-carry.sh DIR     (default: gpu-carry)
#
# writes DIR/ and DIR.tar.xz (which unpacks into DIR's last name). On the
# GPU machine, from the source tree (DIR.tar.xz carried beside it):
#   tar xJf gpu-carry.tar.xz && bash bench/gpu-session.sh gpu-carry WHAT...
# (bench/gpu-session.sh says what WHAT may be).
set -e
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(pwd)
out=${1:-gpu-carry}
[ -x "$build/amped-run" ] || { echo "gpu-carry: run from a build directory (no ./amped-run)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/bench" "$out/tests" "$out/examples" "$out/lib/.libs" "$out/data" "$out/baselines"
for p in amped-run amped-prep bench/amped-gen bench/powerlaw-counts bench/gpu-mttkrp \
    tests/test_gpu tests/test_gpu_apr tests/test_gpu_gcp tests/test_gpu_completion \
    tests/test_gpu_remap tests/test_gpu_process tests/test_multi_gpu tests/test_memory_plan \
    tests/test_libamped tests/test_libamped_methods tests/amped-run-hooks tests/gcp_trace \
    tests/test_score examples/cp_example; do
    d=$(dirname "$p") f=$(basename "$p")
    if [ -f "$build/$d/.libs/$f" ]; then s="$build/$d/.libs/$f"; else s="$build/$p"; fi
    [ -f "$s" ] || { echo "gpu-carry: $p not built (make check TESTS= builds the tests)" >&2; continue; }
    cp "$s" "$out/$p"
    strip --strip-debug "$out/$p" 2>/dev/null || true
done
cp -P "$build"/lib/.libs/libamped.so* "$out/lib/.libs/"
cp "$src"/../shared/data/*.tns "$out/data/" 2>/dev/null || true
cp "$src"/../shared/baselines/* "$out/baselines/" 2>/dev/null || true
tar cf - -C "$(dirname "$out")" "$(basename "$out")" | xz -6 -T0 > "$out.tar.xz"
ls -l "$out.tar.xz"
