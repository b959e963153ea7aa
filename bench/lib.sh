# Shared by the bench scripts: sourced after $data and $baselines are set.

# The cpu20m tensor, made exactly as the peers' baseline figures were: the
# baselines' own generator, 38 M samples (19.9 M distinct nonzeros), Zipf
# exponent 1.2, dims 200000 x 100000 x 50000.
need_cpu20m() {
    tns="$data/cpu20m.tns"
    [ -f "$tns" ] && return 0
    [ -f "$baselines/powerlaw-gen.c" ] || { echo "bench: need $baselines/powerlaw-gen.c" >&2; exit 1; }
    ${CC:-cc} -O2 -fopenmp -o "$data/powerlaw-gen" "$baselines/powerlaw-gen.c" -lm
    (cd "$data" && ./powerlaw-gen cpu20m 38000000 1.2 200000 100000 50000)
}

# rd100m, Reddit-2015's shape (68.8 M distinct nonzeros, Zipf 1.2), made
# as the baselines' README makes it.
need_rd100m() {
    tns="$data/rd100m.tns"
    [ -f "$tns" ] && return 0
    [ -f "$baselines/powerlaw-gen.c" ] || { echo "bench: need $baselines/powerlaw-gen.c" >&2; exit 1; }
    ${CC:-cc} -O2 -fopenmp -o "$data/powerlaw-gen" "$baselines/powerlaw-gen.c" -lm
    (cd "$data" && ./powerlaw-gen rd100m 130000000 1.2 8211298 176962 8116559)
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
