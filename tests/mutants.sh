#!/usr/bin/env bash
# Planted bugs, one at a time, must each make a test fail (SQLite's habit:
# the tests are judged by the bugs they catch). Not part of `make check`.
#
#   tests/mutants.sh [--list] [--keep] [ID...]
#
# Copies the committed tree (git archive HEAD) to a scratch folder, builds
# it once (CPU only unless AMP_MUTANTS_CUDA=1, for the GPU machine), then
# for each mutant: replaces one exact piece of text in one file (it must
# occur exactly once), rebuilds, runs the tests named for it, and restores
# the file. A mutant is "caught" when a named test fails, "MISSED" when all
# pass, "unbuildable" when the mutant does not compile, and "stale" when
# its text is no longer in the file (the table needs updating). Prints one
# line per mutant and the counts; exits 1 unless every mutant is caught.
# AMP_TEST_DATA as for make check (default ../shared/data).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
list=0 keep=0
want=()
for a in "$@"; do
    case $a in
    --list) list=1 ;;
    --keep) keep=1 ;;
    *) want+=("$a") ;;
    esac
done

# id | file | text | replacement | tests (make check TESTS=...)
# The fields are separated by " @@ "; the text is literal.
mutants=$(cat <<'EOF'
dedup-last-wins @@ prep/dedup.c @@ t->val[all[i].first] += t->val[all[i].k]; @@ t->val[all[i].first] = t->val[all[i].k]; @@ tests/corpus.sh tests/test_dedup
tns-no-bias @@ prep/tns_read.c @@ r->store_bias = opts->index_base == 0 ? 0 : 1; @@ r->store_bias = 0; @@ tests/test_tns tests/prep_cli.sh
stored-no-checksum @@ format/section_read.c @@     uint64_t h = XXH3_64bits(p, (size_t)s->stored_size); @@     uint64_t h = XXH3_64bits(p, (size_t)s->stored_size); if (!(s->flags & AMP_SECTION_ZSTD)) return AMP_OK; @@ tests/amp_corpus.sh tests/test_amp_corpus
header-no-checksum @@ format/reader.c @@ if (!amp_hash_matches(stored, computed)) @@ if (0) @@ tests/amp_corpus.sh tests/test_amp_corpus
dir-no-checksum @@ format/reader.c @@ if (!amp_hash_matches(f->dir_hash, computed)) @@ if (0) @@ tests/amp_corpus.sh tests/test_amp_corpus
field-no-mask @@ format/amped_format.h @@     return v & mask; @@     return v; @@ tests/test_format tests/test_cpd
parse-no-max @@ common/amp_parse.c @@     if (ok <= 0 || *end != '\0' || v < min || v > max) @@     if (ok <= 0 || *end != '\0' || v < min) @@ tests/test_common tests/prep_cli.sh tests/run_cli.sh
deal-no-load @@ prep/build.c @@ uint64_t wl = (t->load[s] += degree); @@ uint64_t wl = (t->load[s] += 0); @@ tests/test_format
ref-mttkrp-assign @@ run/core/mttkrp_ref.c @@                 M[out * rank + r] += row[r]; @@                 M[out * rank + r] = row[r]; @@ tests/test_cpd tests/test_partition
relabel-reversed @@ run/core/factor_io.c @@ inv[t->new_to_orig[m][k]] = k; @@ inv[t->new_to_orig[m][k]] = t->rows[m] - 1 - k; @@ tests/run_cp.sh tests/test_cpd
cpu-slot-merge @@ run/cpu/mttkrp_cpu_impl.h @@                     dst[r] += src[r]; @@                     dst[r] = src[r]; @@ tests/test_cpd
cpu-one-factor @@ run/cpu/mttkrp_cpu_impl.h @@ acc[r] += v * r0[r] * r1[r]; @@ acc[r] += v * r0[r]; @@ tests/test_cpd
pinv-multiply @@ run/cpu/als.c @@ sum += Q[i * R + k] * Q[j * R + k] / w[k]; @@ sum += Q[i * R + k] * Q[j * R + k] * w[k]; @@ tests/test_cpd
pinv-cutoff @@ run/cpu/als.c @@     double cut = (double)R * DBL_EPSILON * wmax; @@     double cut = 0.5 * wmax; @@ tests/test_cpd
gram-sum @@ run/cpu/als.c @@ w.V[k] *= w.G[m][k]; @@ w.V[k] += w.G[m][k]; @@ tests/test_cpd
lambda-one @@ run/cpu/als.c @@ lambda[r] = first ? sqrt(sq) : (mx > 1 ? mx : 1); @@ lambda[r] = first ? sqrt(sq) : 1; @@ tests/test_cpd
fit-squared @@ run/cpu/als.c @@ 1 - sqrt(resid > 0 ? resid : 0) / norm_x @@ 1 - (resid > 0 ? resid : 0) / (norm_x * norm_x) @@ tests/test_cpd
converge-early @@ run/cpu/als.c @@         if (it > 0 && delta < o->tol) { @@         if (delta < o->tol) { @@ tests/test_cpd tests/run_cp.sh
norm-abs @@ prep/build.c @@             s += v * v; @@             s += fabs(v); @@ tests/test_format tests/test_cpd
deal-to-last @@ run/core/partition.c @@             if (pm->nnz[g] < pm->nnz[best]) @@             if (pm->nnz[g] >= pm->nnz[best]) @@ tests/test_partition
ref-mode-skip @@ run/core/mttkrp_ref.c @@                 if (m == d) { @@                 if (m == d && 0) { @@ tests/test_cpd tests/test_partition
EOF
)

if [ "$list" = 1 ]; then
    printf '%s\n' "$mutants" | awk -F ' @@ ' '{ printf "%-20s %s\n", $1, $2 }'
    exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/amped-mutants.XXXXXX") || exit 1
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
(cd "$src" && git archive HEAD) | tar -x -C "$work" || exit 1
cd "$work" || exit 1
cuda=--without-cuda
[ "${AMP_MUTANTS_CUDA:-0}" = 1 ] && cuda=
export AMP_TEST_DATA="${AMP_TEST_DATA:-$src/../shared/data}"
echo "mutants: building the unmutated tree in $work"
{ autoreconf -fi && mkdir -p _b && cd _b && ../configure $cuda && make -j"$(nproc)" &&
    make -j"$(nproc)" check TESTS=; } >"$work/build.log" 2>&1 ||
    { echo "mutants: the unmutated tree does not build (see $work/build.log)"; keep=1; exit 1; }
cd "$work/_b" || exit 1

caught=0 missed=0 other=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    id=${line%% @@ *}; rest=${line#* @@ }
    file=${rest%% @@ *}; rest=${rest#* @@ }
    from=${rest%% @@ *}; rest=${rest#* @@ }
    to=${rest%% @@ *}; tests=${rest#* @@ }
    if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qx -- "$id"; then
        continue
    fi
    cp "../$file" "$work/orig"
    n=$(FROM=$from python3 -c 'import os,sys; print(open(sys.argv[1]).read().count(os.environ["FROM"]))' "../$file")
    if [ "$n" != 1 ]; then
        printf '%-20s stale: its text is in %s %s times, not once\n' "$id" "$file" "$n"
        other=$((other + 1))
        continue
    fi
    FROM=$from TO=$to python3 -c 'import os,sys; f=sys.argv[1]; s=open(f).read(); open(f,"w").write(s.replace(os.environ["FROM"], os.environ["TO"], 1))' "../$file"
    if ! make -j"$(nproc)" >"$work/mutant.log" 2>&1 || ! make -j"$(nproc)" check TESTS= >>"$work/mutant.log" 2>&1; then
        printf '%-20s unbuildable (%s)\n' "$id" "$file"
        other=$((other + 1))
    else
        # shellcheck disable=SC2086
        make check TESTS="$tests" >"$work/mutant.log" 2>&1
        fails=$(grep -cE '^(FAIL|ERROR):' "$work/mutant.log")
        if [ "$fails" -gt 0 ]; then
            printf '%-20s caught by %s failing result(s) (%s)\n' "$id" "$fails" "$tests"
            caught=$((caught + 1))
        else
            printf '%-20s MISSED (%s)\n' "$id" "$tests"
            missed=$((missed + 1))
        fi
    fi
    cp "$work/orig" "../$file"
    touch "../$file"
done <<<"$mutants"
make -j"$(nproc)" >/dev/null 2>&1
echo "$caught caught, $missed missed, $other not run"
[ "$missed" -eq 0 ] && [ "$other" -eq 0 ]
