# Shared by the bench scripts, sourced right after they set $here (this
# folder). Run from the build tree: $build is the working directory.
src=$(cd "$here/.." && pwd)
build=$(pwd)
prep="$build/amped-prep"
run="$build/amped-run"
data=${AMP_BENCH_DIR:-$build/bench/data}
baselines=${AMP_BASELINES:-$src/../shared/baselines}
mkdir -p "$data"

# need_built FILE...: stop unless every program was built.
need_built() {
    for b in "$@"; do
        [ -x "$b" ] || { echo "bench: build first: $b missing" >&2; exit 1; }
    done
}

need_python3() {
    command -v python3 >/dev/null 2>&1 || { echo "bench: needs python3 to read the JSON reports" >&2; exit 1; }
}

# A tensor made by the baselines' own generator, as the peers' baseline
# figures were: need_powerlaw NAME SAMPLES EXPONENT DIM..., sets $tns. On a
# machine without a C compiler (the GPU hosts), bench/powerlaw-counts draws
# the same tensor (tests/powerlaw_counts.sh checks that it does) as FROSTT
# binary.
need_powerlaw() {
    tns="$data/$1.tns"
    [ -f "$tns" ] && return 0
    [ -f "$data/$1.bin" ] && { tns="$data/$1.bin"; return 0; }
    if ! command -v "${CC:-cc}" >/dev/null 2>&1 && [ -x "$build/bench/powerlaw-counts" ]; then
        _n=$1
        shift
        tns="$data/$_n.bin"
        "$build/bench/powerlaw-counts" --values hash "$tns" "$@"
        return
    fi
    [ -f "$baselines/powerlaw-gen.c" ] || { echo "bench: need $baselines/powerlaw-gen.c" >&2; exit 1; }
    ${CC:-cc} -O2 -fopenmp -o "$data/powerlaw-gen" "$baselines/powerlaw-gen.c" -lm
    (cd "$data" && ./powerlaw-gen "$@")
}

# cpu20m: 38 M samples (19.9 M distinct nonzeros), Zipf exponent 1.2, dims
# 200000 x 100000 x 50000.
need_cpu20m() { need_powerlaw cpu20m 38000000 1.2 200000 100000 50000; }

# rd100m, Reddit-2015's shape (68.8 M distinct nonzeros, Zipf 1.2), as the
# baselines' README makes it.
need_rd100m() { need_powerlaw rd100m 130000000 1.2 8211298 176962 8116559; }

# rd100m-counts: rd100m's samples and pattern, each value the number of
# samples that hit the coordinate (how Reddit's counts arise), for CP-APR.
need_rd100m_counts() {
    tns="$data/rd100m-counts.bin"
    [ -f "$tns" ] && return 0
    need_built "$build/bench/powerlaw-counts"
    "$build/bench/powerlaw-counts" "$tns" 130000000 1.2 8211298 176962 8116559
}

# $threads: AMP_THREADS, or 1 2 4 ... up to and including nproc.
sweep_threads() {
    ncpu=$(nproc)
    threads=${AMP_THREADS:-}
    if [ -z "$threads" ]; then
        t=1
        while [ "$t" -lt "$ncpu" ]; do threads="$threads $t"; t=$((t * 2)); done
        threads="$threads $ncpu"
    fi
}
