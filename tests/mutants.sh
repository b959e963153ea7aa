#!/usr/bin/env bash
# Planted bugs, one at a time, must each make a test fail (SQLite's habit:
# the tests are judged by the bugs they catch). Not part of `make check`.
#
#   tests/mutants.sh [--list] [--keep] [ID...]
#   tests/mutants.sh --export DIR [ID...]      (build the GPU mutants here)
#   tests/mutants.sh --run-exported DIR        (run them on a GPU machine)
#
# Copies the committed tree (git archive HEAD) to a scratch folder, builds
# it once (CPU only unless AMP_MUTANTS_CUDA=1), then for each mutant:
# replaces one exact piece of text in one file (it must occur exactly
# once), rebuilds, runs the tests named for it, and restores the file. A
# mutant is "caught" when a named test fails that the unmutated tree passes
# (each test is run unmutated once, before its first mutant: a failure it
# has already, from a bug or from the machine, catches nothing), "MISSED"
# when no new one fails, "unbuildable" when the mutant does not compile,
# and "stale" when its text is no longer in the file (the table needs
# updating). Prints one line per mutant and the counts; exits 1 unless
# every mutant run is caught.
#
# GPU mutants (every test they name is tests/test_gpu, tests/test_multi_gpu,
# tests/test_gpu_apr, tests/test_gpu_completion, tests/test_gpu_gcp or the
# script tests/gpu_starts.sh, exported with its amped-run) run only with
# AMP_MUTANTS_CUDA=1 on a machine with
# two GPUs; otherwise they are listed as not run, which is no failure.
# Where the GPU machine cannot build (no headers, no libtool), --export
# builds them here with CUDA and copies each one's test programs, and the
# unmutated ones (base/), into DIR; --run-exported DIR runs them there
# (AMP_TEST_DATA as below). A mutant is caught there when a test fails that
# passes in base/ (each program stops at its first such failure), when its
# program crashes, or when it runs past AMP_MUTANTS_TIMEOUT seconds
# (default 300; a hang). base/'s failures come from a full run of base/,
# or from DIR/base.PROGRAM.known (test numbers, comma-separated) if there.
# AMP_TEST_DATA as for make check (default ../shared/data).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
list=0 keep=0 export_dir= run_dir=
want=()
while [ $# -gt 0 ]; do
    case $1 in
    --list) list=1 ;;
    --keep) keep=1 ;;
    --export) export_dir=$2; shift ;;
    --run-exported) run_dir=$2; shift ;;
    *) want+=("$1") ;;
    esac
    shift
done
export AMP_TEST_DATA="${AMP_TEST_DATA:-$src/../shared/data}"
limit=${AMP_MUTANTS_TIMEOUT:-300}

# Numbers of the failing tests in a TAP log, comma-separated.
failing() { sed -n 's/^not ok \([0-9]*\).*/\1/p' "$1" | paste -sd, -; }

if [ -n "$run_dir" ]; then
    cd "$run_dir" || exit 1
    caught=0 missed=0
    # What the unmutated programs fail already (a known failure, from a
    # full run, is no catch); then each mutant's, stopping at the first
    # other failure (AMP_TAP_BAIL).
    for prog in base/*; do
        name=${prog##*/}
        if [ ! -f "base.$name.known" ]; then
            (cd base && timeout "$limit" "./$name") >"base.$name.log" 2>&1
            failing "base.$name.log" >"base.$name.known"
        fi
        echo "base $name: known failures: $(cat "base.$name.known")"
    done
    for d in */; do
        id=${d%/}
        case $id in base | bins | src) continue ;; esac   # (bins, src: export_script's)
        verdict=MISSED
        for prog in "$id"/*; do
            name=${prog##*/}
            known=$(cat "base.$name.known" 2>/dev/null)
            (cd "$id" && AMP_TAP_BAIL=1 AMP_TAP_KNOWN=$known timeout "$limit" "./$name") \
                >"$id.$name.log" 2>&1
            st=$?
            new=$(grep '^not ok' "$id.$name.log" | grep -v -E "^not ok ($(echo "${known:-x}" | tr , '|')) " | head -1)
            if [ -n "$new" ]; then
                verdict="caught by $name: ${new:0:110}"
            elif [ "$st" -ge 124 ]; then
                verdict="caught by $name: exit status $st (a crash or a hang)"
            fi
            [ "$verdict" = MISSED ] || break
        done
        printf '%-20s %s\n' "$id" "$verdict"
        case $verdict in MISSED) missed=$((missed + 1)) ;; *) caught=$((caught + 1)) ;; esac
    done
    echo "$caught caught, $missed missed"
    [ "$missed" -eq 0 ]
    exit
fi

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
pinv-multiply @@ run/cpu/als.c @@ w[k] = w[k] > cut ? 1 / sqrt(w[k]) : 0; @@ w[k] = w[k] > cut ? sqrt(w[k]) : 0; @@ tests/test_cpd
pinv-cutoff @@ run/cpu/als.c @@     double cut = (double)R * DBL_EPSILON * wmax; @@     double cut = 0.5 * wmax; @@ tests/test_cpd
gram-sum @@ run/cpu/als.c @@ w.V[k] *= w.G[m][k]; @@ w.V[k] += w.G[m][k]; @@ tests/test_cpd
lambda-one @@ run/cpu/als.c @@ lambda[r] = first ? sqrt(sq) : (mx > 1 ? mx : 1); @@ lambda[r] = first ? sqrt(sq) : 1; @@ tests/test_cpd
fit-squared @@ run/cpu/als.c @@ 1 - sqrt(resid > 0 ? resid : 0) / norm_x @@ 1 - (resid > 0 ? resid : 0) / (norm_x * norm_x) @@ tests/test_cpd
converge-early @@ run/cpu/als.c @@         if (it > 0 && delta < o->tol) { @@         if (delta < o->tol) { @@ tests/test_cpd tests/run_cp.sh
norm-abs @@ prep/build.c @@             s += v * v; @@             s += fabs(v); @@ tests/test_format tests/test_cpd
deal-to-last @@ run/core/partition.c @@             if (pm->nnz[g] < pm->nnz[best]) @@             if (pm->nnz[g] >= pm->nnz[best]) @@ tests/test_partition
ref-mode-skip @@ run/core/mttkrp_ref.c @@                 if (m == d) { @@                 if (m == d && 0) { @@ tests/test_cpd tests/test_partition
keep-norm @@ prep/build.c @@         total += delta; @@         total += 0 * delta; @@ tests/corpus.sh tests/test_cpd
cpu-inner @@ run/cpu/als.c @@ p.in[r] += x[r] * m[r]; @@ p.in[r] += x[r]; @@ tests/test_cpd
init-lambda-first @@ run/core/factor_io.c @@     const unsigned L = t->nmodes - 1, R = c->rank; @@     const unsigned L = 0, R = c->rank; @@ tests/test_cpd tests/run_cp.sh
init-nonempty-random @@ run/core/factor_io.c @@     memset(s->A, 0, (size_t)s->rows * s->R * sizeof *s->A); @@     (void)s; @@ tests/readers.sh
init-npy-f32-as-f64 @@ run/core/factor_io.c @@         if (h->width == 8) { @@         if (h->width != 0) { @@ tests/readers.sh
init-npy-unsorted @@ run/core/factor_io.c @@         if (k > 0 && u < v[k - 1]) @@         if (0) @@ tests/readers.sh
init-text-index-repeat @@ run/core/factor_io.c @@     if (ix == *prev) @@     if (0) @@ tests/readers.sh
init-ktn-rank @@ run/core/factor_io.c @@     if (v[0] != R) @@     if (0) @@ tests/readers.sh
init-manifest-first @@ run/core/factor_io.c @@         if (listed && there[f]) { @@         if (there[f]) { @@ tests/readers.sh
stream-pack-shift @@ run/cuda/stream_pack.c @@ out |= amp_blco_field(key, w, l->shift[m], l->width[m]) << s->shift[m]; @@ out |= amp_blco_field(key, w, l->shift[m], l->width[m]) << (s->shift[m] + 1); @@ tests/test_cpd
gpu-hadamard-mode @@ run/cuda/als_gpu.cu @@ amp_gpu_hadamard(&gs, u->d, R, w->V, w->s) @@ amp_gpu_hadamard(&gs, u->prev, R, w->V, w->s) @@ tests/test_gpu tests/test_multi_gpu
gpu-lambda-floor @@ run/cuda/als_kernels.cu @@ double l = first ? sqrt(totals[r]) / p : fmax(totals[2 * R + r] / p, 1.0); @@ double l = first ? sqrt(totals[r]) / p : totals[2 * R + r] / p; @@ tests/test_gpu tests/test_multi_gpu
gpu-pinv-multiply @@ run/cuda/als_kernels.cu @@ Qs[k] = wk > cut ? Q[k] / wk : 0; @@ Qs[k] = wk > cut ? Q[k] * wk : 0; @@ tests/test_gpu tests/test_multi_gpu
gpu-solve-inner @@ run/cuda/als_solve.cu @@ in += a[u] * m[u]; @@ in += a[u]; @@ tests/test_gpu tests/test_multi_gpu
gpu-team-sum @@ run/cuda/mttkrp.cu @@ p[u][j] *= x[m][u][j]; @@ p[u][j] += x[m][u][j]; @@ tests/test_gpu tests/test_multi_gpu
gpu-lane-mul @@ run/cuda/mttkrp.cu @@ a.x *= b.x; a.y *= b.y; } @@ a.x *= b.x; a.y *= b.x; } @@ tests/test_gpu tests/test_multi_gpu
gpu-packed-sign @@ run/cuda/mttkrp.cu @@ : (int64_t)(raw << (64 - a.qbits)) >> (64 - a.qbits); @@ : (int64_t)raw; @@ tests/test_gpu tests/test_multi_gpu
gpu-fit-lambda @@ run/cuda/als_kernels.cu @@ double h = lambda[k / R] * lambda[k % R]; @@ double h = lambda[k / R]; @@ tests/test_gpu tests/test_multi_gpu
nccl-max-as-sum @@ run/comm/comm_nccl.cu @@ max ? ncclMax : ncclSum @@ ncclSum @@ tests/test_multi_gpu
nccl-recv-own @@ run/comm/comm_nccl.cu @@ r = ncclRecv(b + offset[peer] * es, count[peer] @@ r = ncclRecv(b + offset[c->gpu] * es, count[peer] @@ tests/test_multi_gpu
copy-pull-own-rows @@ run/comm/comm_nccl.cu @@ (const char *)G->buf[p] + offset[p] * es @@ (const char *)G->buf[p] + offset[me] * es @@ tests/test_multi_gpu
admm-no-project @@ run/cpu/update.c @@ const double v = relu(At[k] - U[k] - t) * sc, u @@ const double v = prox(At[k] - U[k], t, sc, 0), u @@ tests/test_constrained
admm-tol-no-project @@ run/cpu/update.c @@         return up * s; @@         return (up - relu(-(z + t))) * s; @@ tests/test_constrained
admm-dual-sign @@ run/cpu/update.c @@ * sc, u = U[k] + (v - At[k]); @@ * sc, u = U[k] - (v - At[k]); @@ tests/test_constrained
admm-tol-dual-sign @@ run/cpu/update.c @@ u[r] += v - xt[r]; @@ u[r] -= v - xt[r]; @@ tests/test_constrained
hals-no-floor @@ run/cpu/update.c @@         return y > AMP_UPDATE_EPS ? y : AMP_UPDATE_EPS; @@         return y; @@ tests/test_constrained
mu-no-l2 @@ run/cpu/update.c @@ (AV[k] + l2 * A[k] + AMP_UPDATE_EPS) @@ (AV[k] + AMP_UPDATE_EPS) @@ tests/test_constrained
warm-start-off @@ run/cpu/als.c @@                 warm_start(c, d, own, nown, w.U[d], w.T); @@                 (void)0; @@ tests/test_constrained
gpu-admm-dual-sign @@ run/cuda/constrained.cu @@ u[r] += v - at[r]; @@ u[r] -= v - at[r]; @@ tests/test_gpu
gpu-admm-stop-primal @@ run/cuda/constrained.cu @@ sums[r][1] += (v - old) * (v - old); @@ sums[r][1] += 0 * old; @@ tests/test_gpu
gpu-mu-no-l2 @@ run/cuda/constrained.cu @@ (av + l2 * a + AMP_UPDATE_EPS) @@ (av + 0 * l2 * a + AMP_UPDATE_EPS) @@ tests/test_gpu
gpu-hals-sweep @@ run/cuda/update_hals.cu @@ for (int q = c + 1; q < RP; q++) @@ for (int q = c + 2; q < RP; q++) @@ tests/test_gpu
gpu-hals-scale @@ run/cuda/update_hals.cu @@ va[it] = k < total ? At[k] * s_scale[col] : 0.0; @@ va[it] = k < total ? At[k] : 0.0; @@ tests/test_gpu
gpu-admm-rho @@ run/cuda/constrained.cu @@ tr > 0 && isfinite(tr) ? tr / R : 1; @@ tr > 0 && isfinite(tr) ? tr / (R + 1) : 1; @@ tests/test_gpu
auto-remap-any-file @@ run/cuda/memory_plan.c @@ s->remap <= s->avail && s->remap_in_file) @@ s->remap <= s->avail) @@ tests/test_memory_plan
gpu-apr-eps-side @@ run/cuda/apr.cu @@ x[u] / (dot[u] > eps ? dot[u] : eps); @@ x[u] / (dot[u] < eps ? dot[u] : eps); @@ tests/test_gpu_apr
gpu-apr-krp-row @@ run/cuda/apr.cu @@ p[u][j] *= g[m][u][j]; @@ p[u][j] *= g[0][u][j]; @@ tests/test_gpu_apr
gpu-apr-shift-rule @@ run/cuda/apr.cu @@ if (shift && (double)Phi[i] > above && v < kappa_tol) @@ if (shift && (double)Phi[i] > above) @@ tests/test_gpu_apr
gpu-apr-last-row-store @@ run/cuda/apr.cu @@ apr_flush<real, RPL>(Phi, R, cur, acc, 1, lane); @@ apr_flush<real, RPL>(Phi, R, cur, acc, 0, lane); @@ tests/test_gpu_apr
EOF
)
# Issue 42: Poisson CP's planted bugs (the issue's three first), caught by
# run_apr.sh's pyttb comparison, model recovery and log-likelihood check;
# the last two undo no inner iterations past a mode's stop (the CPU runs a
# row's at once), caught by the pyttb comparison at tol 0.3.
mutants="$mutants
$(cat <<'EOF'
apr-no-kappa-shift @@ run/cpu/apr.c @@                         A[at] += kappa; @@                         A[at] += 0; @@ tests/run_apr.sh
apr-eps-wrong-side @@ run/cpu/apr.c @@                 w[q] = x[k + q] / (m[q] > eps ? m[q] : eps); @@                 w[q] = x[k + q] / (m[q] > eps ? eps : m[q]); @@ tests/run_apr.sh
apr-eps-wrong-side-n @@ run/cpu/apr.c @@ const double mk = dot_lanes(Bi, p, R), w = x[k] / (mk > eps ? mk : eps); @@ const double mk = dot_lanes(Bi, p, R), w = x[k] / (mk > eps ? eps : mk); @@ tests/run_apr.sh
apr-three-wrong-row @@ run/cpu/apr.c @@ const double *restrict r1 = am->F[1] + ((w >> am->sh[1]) & am->mask[1]) * R; @@ const double *restrict r1 = am->F[1] + ((w >> am->sh[0]) & am->mask[0]) * R; @@ tests/run_apr.sh
apr-krp-wrong-row @@ run/cpu/apr.c @@                            : (w >> am->sh[j]) & am->mask[j]; @@                            : (w >> am->sh[0]) & am->mask[0]; @@ tests/run_apr.sh
apr-loglik-no-total @@ run/cpu/apr.c @@ c->loglik = sum - total; @@ c->loglik = sum; @@ tests/run_apr.sh
apr-converged-always @@ run/cpu/apr.c @@                 converged = 0; @@                 (void)0; @@ tests/run_apr.sh
apr-normalize-l2 @@ run/cpu/apr.c @@                 s[r] += fabs(A[i * R + r]); @@                 s[r] += A[i * R + r] * A[i * R + r]; @@ tests/run_apr.sh
apr-count-any-real @@ run/cpu/apr.c @@ if (v < 0 || (!allow_noninteger && v != floor(v))) @@ if (v < 0 || (!allow_noninteger && v != v)) @@ tests/run_apr.sh
apr-eps-wrong-side-long @@ run/cpu/apr.c @@ const double x = value_at(am, k) / (m > eps ? m : eps); @@ const double x = value_at(am, k) / (m > eps ? eps : m); @@ tests/run_apr.sh
apr-stop-no-redo @@ run/cpu/apr.c @@             if (jstar >= 2 || (jstar == 1 && spec)) { @@             if (jstar >= 2) { @@ tests/run_apr.sh
apr-stop-no-redo-mid @@ run/cpu/apr.c @@             if (jstar >= 2 || (jstar == 1 && spec)) { @@             if (jstar == 1 && spec) { @@ tests/run_apr.sh
EOF
)"
# Issue 43: CP completion's planted bugs (a dropped observation, the ridge
# on the wrong side, a term missing from the per-row system), caught by
# run_completion.sh's dense masked reference and planted recovery; and the
# GPU kernel's (run on a GPU by tests/test_gpu_completion).
mutants="$mutants
$(cat <<'EOF'
cmp-drop-first-entry @@ run/cpu/completion.c @@ for (uint64_t j = a; j < e; j++) { @@ for (uint64_t j = a + 1; j < e; j++) { @@ tests/run_completion.sh
cmp-ridge-wrong-sign @@ run/cpu/completion.c @@         K[(size_t)j * R + j] += l2; @@         K[(size_t)j * R + j] -= l2; @@ tests/run_completion.sh
cmp-ridge-on-rhs @@ run/cpu/completion.c @@         K[(size_t)j * R + j] += l2; @@         b[j] += l2; @@ tests/run_completion.sh
cmp-solve-skips-column @@ run/cpu/completion.c @@             b[q] -= K[(size_t)q * R + j] * hj; @@             b[q] -= q ? K[(size_t)q * R + j] * hj : 0; @@ tests/run_completion.sh
cmp-piece-dropped @@ run/cpu/completion.c @@ for (uint64_t k = first_piece(pc, i); k < pc->n && pc->row[k] == i; @@ for (uint64_t k = first_piece(pc, i) + 1; k < pc->n && pc->row[k] == i; @@ tests/run_completion.sh
cmp-batch-overwrites @@ run/cpu/completion.c @@ 1.0, s->Z, (int)R, 1.0, @@ 1.0, s->Z, (int)R, 0.0, @@ tests/run_completion.sh
cmp-k-missing-mode @@ run/cpu/completion.c @@     for (unsigned j = 1; j < cm->nother; j++) { @@     for (unsigned j = 1; j + 1 < cm->nother; j++) { @@ tests/run_completion.sh
cmp-kept-unscaled @@ run/cpu/completion.c @@                         h[r] *= lam[r]; @@                         h[r] *= 1; @@ tests/run_completion.sh
cmp-holdout-seedless @@ run/core/amp_completion.h @@ uint64_t h = amp_completion_mix(seed ^ UINT64_C(0x6a09e667f3bcc909)); @@ uint64_t h = amp_completion_mix(UINT64_C(0x6a09e667f3bcc909)); @@ tests/run_completion.sh
gpu-cmp-rhs-unweighted @@ run/cuda/completion.cu @@ sys[e] += x * ks[e - T]; @@ sys[e] += ks[e - T]; @@ tests/test_gpu_completion
gpu-cmp-ridge-sign @@ run/cuda/completion.cu @@ sys[j * R - j * (j - 1) / 2] += a.l2; @@ sys[j * R - j * (j - 1) / 2] -= a.l2; @@ tests/test_gpu_completion
gpu-cmp-carry-dropped @@ run/cuda/completion.cu @@ sys[e] += a.carry_in[e]; @@ sys[e] += 0 * a.carry_in[e]; @@ tests/test_gpu_completion
gpu-cmp-back-subst @@ run/cuda/completion.cu @@ for (unsigned q = lane; q < jj; q += 32) @@ for (unsigned q = lane + 1; q < jj; q += 32) @@ tests/test_gpu_completion
EOF
)"
# Issue 43: GCP's planted bugs (a wrong stratum weight, a gradient's sign,
# a dropped bound projection, lazy Adam's row slots never emptied, so a
# row touched once is never listed again), in the CPU's reference and the GPU's
# kernels, caught by test_gcp's expectations and run_gcp.sh's runs, and by
# test_gpu_gcp against the CPU.
mutants="$mutants
$(cat <<'EOF'
gcp-zero-weight @@ run/cpu/gcp.c @@ y[j] = ((uint64_t)j < snz ? b->wnz : b->wz) @@ y[j] = ((uint64_t)j < snz ? b->wnz : b->wnz) @@ tests/test_gcp tests/run_gcp.sh
gcp-plan-zero-weight @@ run/core/gcp.c @@ p->grad_wz = p->grad_z ? (double)zeros / (double)p->grad_z : 0; @@ p->grad_wz = p->grad_z ? (double)v->cells / (double)p->grad_z : 0; @@ tests/test_gcp tests/run_gcp.sh
gcp-start-block-short @@ run/core/gcp.c @@ const uint64_t lo = (uint64_t)b * bs, hi = lo + bs < n ? lo + bs : n; @@ const uint64_t lo = (uint64_t)b * bs, hi = lo + bs < n ? lo + bs - 1 : n; @@ tests/test_gcp tests/run_gcp.sh
gcp-finish-lambda-one-mode @@ run/core/gcp.c @@             lambda[r] *= nrm[r]; @@             if (m == 0) lambda[r] *= nrm[r]; @@ tests/test_gcp tests/run_gcp.sh
gcp-sort-one-chunk @@ run/core/gcp.c @@ const uint64_t to = cc[(ks[i] >> shift) & 0xffff]++; @@ const uint64_t to = count[(ks[i] >> shift) & 0xffff]++; @@ tests/test_gcp
gcp-gradient-sign @@ run/cpu/gcp.c @@                     g[r] += z[r]; @@                     g[r] -= z[r]; @@ tests/test_gcp tests/run_gcp.sh
gcp-no-projection @@ run/cpu/gcp.c @@     *a = x > lower ? x : lower; @@     *a = x; @@ tests/test_gcp tests/run_gcp.sh
gpu-gcp-zero-weight @@ run/cuda/gcp.cu @@ (j < a.b.snz ? a.b.wnz : a.b.wz) * amp_gcp_df @@ (j < a.b.snz ? a.b.wnz : a.b.wnz) * amp_gcp_df @@ tests/test_gpu_gcp
gpu-gcp-gradient-sign @@ run/cuda/gcp.cu @@ atomicAdd(&a.f.G[n][rows[n] * R + r], z); @@ atomicAdd(&a.f.G[n][rows[n] * R + r], -z); @@ tests/test_gpu_gcp
gpu-gcp-no-projection @@ run/cuda/gcp.cu @@     A[i] = x > lower ? x : lower; @@     A[i] = x; @@ tests/test_gpu_gcp
gcp-lazy-slot-kept @@ run/cpu/gcp.c @@         slot[touched[q]] = -1; @@         slot[touched[q]] = slot[touched[q]]; @@ tests/test_gcp tests/run_gcp.sh
gpu-gcp-lazy-slot-kept @@ run/cuda/gcp.cu @@             slot[row] = 0; @@             slot[row] = 1; @@ tests/test_gpu_gcp
EOF
)"
# Issue 40: mutants of the code's contracts (the update rules with every
# constraint, the loop, the outputs, the processes' statistics, prep, the
# format's reserved and ranged fields, the option parsers), written before
# the tests that close their classes.
mutants="$mutants
$(cat <<'EOF'
admm-prox-shrink-sign @@ run/cpu/update.c @@     const double up = relu(z - t); @@     const double up = relu(z + t); @@ tests/test_constrained tests/run_methods.sh tests/run_cp.sh tests/run_constrained.sh
admm-prox-neg-side @@ run/cpu/update.c @@     return (up - relu(-(z + t))) * s; @@     return (up - relu(-(z - t))) * s; @@ tests/test_constrained tests/run_methods.sh tests/run_cp.sh tests/run_constrained.sh
admm-tol-either @@ run/cpu/update.c @@ if (primal <= tol2 * xn && dual <= tol2 * un) { @@ if (primal <= tol2 * xn || dual <= tol2 * un) { @@ tests/test_constrained tests/run_methods.sh tests/run_cp.sh tests/run_constrained.sh
hals-free-l1-sign @@ run/cpu/update.c @@ double t = num > l1 ? num - l1 : num < -l1 ? num + l1 : 0; @@ double t = num > l1 ? num - l1 : num < -l1 ? num - l1 : 0; @@ tests/test_constrained tests/run_methods.sh tests/run_cp.sh tests/run_constrained.sh
hals-self-term @@ run/cpu/update.c @@     double num = mr - (s - xr * vrr); @@     double num = mr - s; @@ tests/test_constrained tests/run_methods.sh tests/run_cp.sh tests/run_constrained.sh
mu-l1-sign @@ run/cpu/update.c @@         double num = M[k] - l1; @@         double num = M[k] + l1; @@ tests/test_constrained tests/run_methods.sh tests/run_cp.sh tests/run_constrained.sh
mu-no-eps-floor @@ run/cpu/update.c @@         A[k] = v > AMP_UPDATE_EPS ? v : AMP_UPDATE_EPS; @@         A[k] = v; @@ tests/test_constrained tests/run_methods.sh tests/run_cp.sh tests/run_constrained.sh
admm-dual-unscaled @@ run/cpu/als.c @@ U[(uint64_t)i * R + r] *= inv[r]; @@ U[(uint64_t)i * R + r] *= 1; @@ tests/test_constrained tests/test_cpd tests/run_methods.sh tests/run_cp.sh tests/run_mpi.sh
warm-dual-unscaled @@ run/cpu/als.c @@ U[(uint64_t)i * R + r] *= lambda[r]; @@ U[(uint64_t)i * R + r] *= 1; @@ tests/test_constrained tests/test_cpd tests/run_methods.sh tests/run_cp.sh tests/run_mpi.sh
fit-norm-unsquared @@ run/cpu/als.c @@ double resid = t->norm_sq + model_norm_sq(w.G, N, R, c->lambda) - 2 * inner; @@ double resid = norm_x + model_norm_sq(w.G, N, R, c->lambda) - 2 * inner; @@ tests/test_constrained tests/test_cpd tests/run_methods.sh tests/run_cp.sh tests/run_mpi.sh
rules-als-l2-ignored @@ run/core/rules.c @@ any |= rule[m].constraint != AMP_CONSTRAINT_NONE || rule[m].l1 > 0 || rule[m].l2 > 0; @@ any |= rule[m].constraint != AMP_CONSTRAINT_NONE || rule[m].l1 > 0; @@ tests/test_constrained tests/run_cli.sh tests/run_methods.sh tests/run_constrained.sh
rules-mu-mode-one @@ run/core/rules.c @@ if (o->method == AMP_METHOD_MU && rule[m].constraint != AMP_CONSTRAINT_NONNEG) @@ if (o->method == AMP_METHOD_MU && rule[0].constraint != AMP_CONSTRAINT_NONNEG) @@ tests/test_constrained tests/run_cli.sh tests/run_methods.sh tests/run_constrained.sh
factor-f32-digits @@ run/core/factor_io.c @@ n += (size_t)sprintf(buf + n, "%s%.9g", r ? " " : "", (double)(float)v); @@ n += (size_t)sprintf(buf + n, "%s%.7g", r ? " " : "", (double)(float)v); @@ tests/readback.sh tests/run_cp.sh tests/test_cpd tests/run_outputs.sh tests/reports.sh tests/messages.sh
init-gram-lambda @@ run/core/factor_io.c @@ G[p * rank + q] *= c->lambda[p] * c->lambda[q]; @@ G[p * rank + q] *= c->lambda[p] * c->lambda[p]; @@ tests/run_cp.sh tests/test_cpd tests/run_outputs.sh tests/reports.sh tests/messages.sh
json-compact-dims @@ run/run_report.c @@ put_u64_array(&b, t->rows, t->nmodes); @@ put_u64_array(&b, t->dims, t->nmodes); @@ tests/reports.sh tests/run_outputs.sh tests/run_mpi.sh tests/run_cp.sh tests/messages.sh
json-process-rows @@ run/run_report.c @@ put_u64_array(&b, q->rows, t->nmodes); @@ put_u64_array(&b, q->nnz, t->nmodes); @@ tests/reports.sh tests/run_outputs.sh tests/run_mpi.sh tests/run_cp.sh tests/messages.sh
json-phase-first @@ run/run_report.c @@ put_number(&b, r->phase_seconds ? r->phase_seconds[p] : 0); @@ put_number(&b, r->phase_seconds ? r->phase_seconds[0] : 0); @@ tests/reports.sh tests/run_outputs.sh tests/run_mpi.sh tests/run_cp.sh tests/messages.sh
html-fit-clock @@ run/report_html.c @@         clock[i] = sum; @@         clock[i] = r->iters[i].seconds; @@ tests/reports.sh tests/run_outputs.sh
dist-nnz-mode-one @@ run/run_dist.c @@ mine[nmodes + m] = (double)d->part.copies[m].nnz; @@ mine[nmodes + m] = (double)d->part.copies[0].nnz; @@ tests/run_mpi.sh tests/reports.sh
dist-rows-rank0 @@ run/run_dist.c @@ mine[2 * nmodes + m] = (double)d->p.modes[m].row_count[me]; @@ mine[2 * nmodes + m] = (double)d->p.modes[m].row_count[0]; @@ tests/run_mpi.sh tests/reports.sh
dist-own-slot0 @@ run/run_dist.c @@ own_rows(d, nmodes, gr, all + (size_t)g->rank * each * K); @@ own_rows(d, nmodes, gr, all); @@ tests/run_mpi.sh tests/reports.sh
mpi-max-as-sum @@ run/mpi/amp_mpi.c @@ max ? MPI_MAX : MPI_SUM @@ MPI_SUM @@ tests/run_mpi.sh tests/reports.sh
dedup-norm-cross @@ prep/dedup.c @@         *delta += sum * sum - sq; @@         *delta += sum * sum; @@ tests/test_dedup tests/corpus.sh tests/prep_cli.sh tests/test_format tests/test_tns
header-reserved-low @@ format/reader.c @@ if (amp_get64(h + AMP_H_RESERVED) != 0) @@ if (amp_get32(h + AMP_H_RESERVED) != 0) @@ tests/amp_corpus.sh tests/test_amp_corpus tests/test_format
dir-reserved-unchecked @@ format/reader.c @@ if (memcmp(dir, AMP_DIR_MAGIC, AMP_MAGIC_LEN) != 0 || amp_get32(dir + 12) != 0 || @@ if (memcmp(dir, AMP_DIR_MAGIC, AMP_MAGIC_LEN) != 0 || @@ tests/amp_corpus.sh tests/test_amp_corpus tests/test_format
field-reserved-low @@ format/codec.c @@         if (amp_get16(q + 2) != 0) @@         if (q[2] != 0) @@ tests/amp_corpus.sh tests/test_amp_corpus tests/test_format
shard-reserved-low @@ format/codec.c @@         if (amp_get32(q + 28) != 0) @@         if (amp_get16(q + 28) != 0) @@ tests/amp_corpus.sh tests/test_amp_corpus tests/test_format
meta-entry-aux @@ format/codec.c @@                 s->count != 0 || s->aux != 0) @@                 s->count != 0) @@ tests/amp_corpus.sh tests/test_amp_corpus tests/test_format
size-tera-shift @@ common/amp_parse.c @@         case 'T': shift = 40; break; @@         case 'T': shift = 30; break; @@ tests/test_common tests/options.sh tests/prep_cli.sh tests/run_cli.sh tests/messages.sh
threads-zero @@ common/amp_cli.c @@ if (amp_parse_u64(arg, 1, AMP_CLI_MAX_THREADS, "--threads", &cli->threads, &err)) @@ if (amp_parse_u64(arg, 0, AMP_CLI_MAX_THREADS, "--threads", &cli->threads, &err)) @@ tests/test_common tests/prep_cli.sh tests/run_cli.sh tests/messages.sh
EOF
)"
# CP-APR on several GPUs (apr.cu; issue 42's "several GPUs and MPI"): the
# GPU ones need two GPUs (tests/test_multi_gpu's CP-APR checks: the KKT
# violations against the CPU's and the stopping decisions, the
# log-likelihoods, the factors), not run on a machine without them; the
# refusal of equal-nnz (run/core/rules.c's one check, which amped-run asks
# before it looks for GPUs) is caught on the CPU by run_apr.sh.
mutants="$mutants
$(cat <<'EOF'
gpu-apr-kkt-one-gpu @@ run/cuda/apr.cu @@ AMP_CHECK(amp_comm_allreduce(w->comm, (double *)w->kkt, 1, 1, w->s, err)); @@ (void)0; @@ tests/test_multi_gpu
gpu-apr-ll-own-slot @@ run/cuda/apr.cu @@ AMP_CHECK(amp_comm_allreduce(w->comm, w->ll_slots, w->ngpus, 0, w->s, err)); @@ (void)0; @@ tests/test_multi_gpu
gpu-apr-no-exchange @@ run/cuda/apr.cu @@ AMP_CHECK(exchange(w, d, err)); @@ (void)0; @@ tests/test_multi_gpu
apr-gpus-equal-nnz @@ run/core/rules.c @@ equal_nnz && (completion || method == AMP_METHOD_APR)) @@ equal_nnz && (completion)) @@ tests/run_apr.sh
EOF
)"
# Completion on several GPUs (completion.cu, issue 43): the GPU ones need
# two GPUs (tests/test_multi_gpu's completion checks: the fits and RMSEs
# against the CPU's and one GPU's, the counts of kept rows, the factors),
# not run on a machine without them; the refusals of equal-nnz and
# --overlap (run/core/rules.c) are caught on the CPU by run_completion.sh.
mutants="$mutants
$(cat <<'EOF'
gpu-cmp-own-slot @@ run/cuda/completion.cu @@ AMP_CHECK(amp_comm_allreduce(w->comm, w->slots, S * w->ngpus, 0, w->s, err)); @@ (void)0; @@ tests/test_multi_gpu
gpu-cmp-no-exchange @@ run/cuda/completion.cu @@ AMP_CHECK(exchange(w, d, err)); @@ (void)0; @@ tests/test_multi_gpu
gpu-cmp-every-row @@ run/cuda/completion.cu @@ a.row_lo = own_lo; @@ a.row_lo = 0; @@ tests/test_multi_gpu
gpu-cmp-test-every-gpu @@ run/cuda/completion.cu @@ const amp_test_set *ts = w->gpu == 0 ? o->completion.test : NULL; @@ const amp_test_set *ts = o->completion.test; @@ tests/test_multi_gpu
cmp-gpus-equal-nnz @@ run/core/rules.c @@ equal_nnz && (completion || method == AMP_METHOD_APR)) @@ equal_nnz && (method == AMP_METHOD_APR)) @@ tests/run_completion.sh
cmp-overlap @@ run/core/rules.c @@ if (completion && overlap) @@ if (0) @@ tests/run_completion.sh
EOF
)"
# Issue 44: several models in one pass (amped-run --starts, --ranks): a
# model's MTTKRP columns read at another model's offset (copied out for
# f32 and the constrained methods, read in place by CP-ALS in f64) or
# its updated rows written at another's, caught by run_starts.sh's
# batched-against-alone fits; FMS without the matching
# (components paired in order), caught by test_score's exhaustive
# assignments and run_starts.sh's exhaustive FMS.
mutants="$mutants
$(cat <<'EOF'
starts-wrong-offset @@ run/cpu/als.c @@ : cat->M64[(uint64_t)i * Rc + off + r]; @@ : cat->M64[(uint64_t)i * Rc + (off + R) % Rc + r]; @@ tests/run_starts.sh
starts-inplace-offset @@ run/cpu/als.c @@ const double *M = in_place ? cat.M64 + bm[k].off : w->M; @@ const double *M = in_place ? cat.M64 + (bm[k].off + R) % cat.Rlive : w->M; @@ tests/run_starts.sh
starts-beside-offset @@ run/cpu/als.c @@ row_copy beside = {f32 ? NULL : cat.A64[d] + bm[k].off, @@ row_copy beside = {f32 ? NULL : cat.A64[d] + (bm[k].off + R) % cat.Rlive, @@ tests/run_starts.sh
gpu-starts-m-offset @@ run/cuda/als_gpu.cu @@ (const char *)cat->M + b->off * word @@ (const char *)cat->M + (b->off + w->R) % cat->Rlive * word @@ tests/gpu_starts.sh
gpu-starts-put-offset @@ run/cuda/als_gpu.cu @@ (char *)cat->A[m] + b->off * word @@ (char *)cat->A[m] + (b->off + w->R) % cat->Rlive * word @@ tests/gpu_starts.sh
fms-no-permutation @@ run/core/score.c @@ sum += C[(size_t)i * n + col[i]]; @@ sum += C[(size_t)i * n + i]; @@ tests/test_score tests/run_starts.sh
EOF
)"

# Issue 45: the fiber level (a fiber's end taken one nonzero late, the fiber
# sum not reset, prep's order and counts, the loader's check, the default).
mutants="$mutants
$(cat <<'EOF'
fib-reg-boundary @@ run/cpu/mttkrp_cpu_reg.h @@                 const REAL *rm = ROW(jm, curm); @@                 const REAL *rm = ROW(jm, mi); @@ tests/test_fibers tests/test_cpd
fib-scalar-boundary @@ run/cpu/mttkrp_cpu_impl.h @@                     const REAL *restrict rm = F[jm] + curm * R; @@                     const REAL *restrict rm = F[jm] + mi * R; @@ tests/test_fibers tests/test_cpd
fib-reg-no-reset @@ run/cpu/mttkrp_cpu_reg.h @@                 fac[u] = (vec){0}; @@                 (void)0; @@ tests/test_fibers tests/test_cpd
fib-scalar-no-reset @@ run/cpu/mttkrp_cpu_impl.h @@                     fac[r] = 0; @@                     (void)0; @@ tests/test_fibers tests/test_cpd
fib-prep-count-row @@ prep/build.c @@             uint64_t n = len > 0; @@             uint64_t n = len > 1; @@ tests/test_format tests/test_fibers
fib-prep-no-sort @@ prep/build.c @@                     pk[i] = amp_blco_field(0, c->words[a + i], sh, wd) << lbits | i; @@                     pk[i] = i; @@ tests/test_format tests/test_fibers
fib-prep-radix-digit @@ prep/build.c @@     for (unsigned at = low; at < low + bits; at += 8) { @@     for (unsigned at = low; at + 8 < low + bits; at += 8) { @@ tests/test_format tests/test_fibers
fib-load-no-check @@ run/core/tensor_load.c @@                     if (have[s] != stored[s]) @@                     if (have[s] + 1 == stored[s] && 0) @@ tests/test_fibers
fib-default-off @@ run/cpu/mttkrp_cpu_impl.h @@     const int fib = ws->fibers != 0 && c->has_fibers && nmodes >= 3 && @@     const int fib = ws->fibers > 0 && c->has_fibers && nmodes >= 3 && @@ tests/test_fibers
EOF
)"

if [ "$list" = 1 ]; then
    printf '%s\n' "$mutants" | awk -F ' @@ ' '{ printf "%-20s %s\n", $1, $2 }'
    exit 0
fi

# Whether every test a mutant names needs a GPU.
gpu_only() {
    local t
    for t in $1; do
        case $t in tests/test_gpu | tests/test_multi_gpu | tests/test_gpu_apr | tests/test_gpu_completion | \
            tests/test_gpu_gcp | tests/gpu_starts.sh) ;;
        *) return 1 ;; esac
    done
}

if [ -n "$export_dir" ]; then
    mkdir -p "$export_dir" && export_dir=$(cd "$export_dir" && pwd) || exit 1
    AMP_MUTANTS_CUDA=1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/amped-mutants.XXXXXX") || exit 1
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
(cd "$src" && git archive HEAD) | tar -x -C "$work" || exit 1
cd "$work" || exit 1
cuda=--without-cuda
[ "${AMP_MUTANTS_CUDA:-0}" = 1 ] && cuda=
echo "mutants: building the unmutated tree in $work"
{ autoreconf -fi && mkdir -p _b && cd _b && ../configure $cuda && make -j"$(nproc)" &&
    make -j"$(nproc)" check TESTS=; } >"$work/build.log" 2>&1 ||
    { echo "mutants: the unmutated tree does not build (see $work/build.log)"; keep=1; exit 1; }
cd "$work/_b" || exit 1
# export_script ID: tests/gpu_starts.sh for DIR/ID, a script: the tree's
# amped-run and amped-prep into DIR/bins/ID (outside DIR/ID, whose every
# file is run as a test) and a wrapper DIR/ID/gpu_starts.sh that runs the
# script (from DIR/src) on them.
export_script() {
    mkdir -p "$export_dir/bins/$1" "$export_dir/$1" "$export_dir/src/tests" &&
        cp amped-run amped-prep "$export_dir/bins/$1/" &&
        cp ../tests/lib.sh ../tests/gpu_starts.sh ../tests/starts_check.py \
            "$export_dir/src/tests/" &&
        printf '#!/bin/sh\nhere=$(cd "$(dirname "$0")" && pwd)\ntop_srcdir=$here/../src top_builddir=$here/../bins/%s exec sh "$here/../src/tests/gpu_starts.sh"\n' \
            "$1" >"$export_dir/$1/gpu_starts.sh" && chmod +x "$export_dir/$1/gpu_starts.sh"
}
if [ -n "$export_dir" ]; then
    mkdir -p "$export_dir/base"
    cp tests/test_gpu tests/test_multi_gpu tests/test_gpu_apr tests/test_gpu_completion \
        tests/test_gpu_gcp "$export_dir/base/" || exit 1
    export_script base || exit 1
fi

# A log's failures, one a line: FAIL lines by test and number (the text may
# hold timings), ERROR lines whole (the exit status, the plan).
failures() {
    sed -n -e 's/^\(FAIL: [^ ]* [0-9]*\).*/\1/p' -e '/^ERROR: /p' "$1" | LC_ALL=C sort -u
}
# baseline TESTS: what the unmutated tree fails, for each of TESTS not run
# unmutated yet, into base.fails (the tree is unmutated between mutants:
# each restores its file, and make check rebuilds).
: >"$work/base.fails"
base_done=" "
baseline() {
    local t
    for t in $1; do
        case $base_done in *" $t "*) continue ;; esac
        base_done="$base_done$t "
        make check TESTS="$t" >"$work/base.log" 2>&1
        failures "$work/base.log" >"$work/base.new"
        if [ -s "$work/base.new" ]; then
            echo "mutants: $t fails unmutated ($(grep -c . "$work/base.new")); those failures catch nothing:"
            sed 's/^/    /' "$work/base.new"
        fi
        LC_ALL=C sort -u -o "$work/base.fails" "$work/base.fails" "$work/base.new"
    done
}

caught=0 missed=0 other=0 skipped=0 exported=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    id=${line%% @@ *}; rest=${line#* @@ }
    file=${rest%% @@ *}; rest=${rest#* @@ }
    from=${rest%% @@ *}; rest=${rest#* @@ }
    to=${rest%% @@ *}; tests=${rest#* @@ }
    if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qx -- "$id"; then
        continue
    fi
    if gpu_only "$tests"; then
        if [ "${AMP_MUTANTS_CUDA:-0}" != 1 ]; then
            printf '%-20s not run: a GPU mutant (AMP_MUTANTS_CUDA=1, or --export)\n' "$id"
            skipped=$((skipped + 1))
            continue
        fi
    elif [ -n "$export_dir" ]; then
        continue
    fi
    cp "../$file" "$work/orig"
    n=$(FROM=$from python3 -c 'import os,sys; print(open(sys.argv[1]).read().count(os.environ["FROM"]))' "../$file")
    if [ "$n" != 1 ]; then
        printf '%-20s stale: its text is in %s %s times, not once\n' "$id" "$file" "$n"
        other=$((other + 1))
        continue
    fi
    [ -n "$export_dir" ] || baseline "$tests"
    FROM=$from TO=$to python3 -c 'import os,sys; f=sys.argv[1]; s=open(f).read(); open(f,"w").write(s.replace(os.environ["FROM"], os.environ["TO"], 1))' "../$file"
    if ! make -j"$(nproc)" >"$work/mutant.log" 2>&1 || ! make -j"$(nproc)" check TESTS= >>"$work/mutant.log" 2>&1; then
        printf '%-20s unbuildable (%s)\n' "$id" "$file"
        other=$((other + 1))
    else
        if [ -n "$export_dir" ]; then
            mkdir -p "$export_dir/$id"
            for t in $tests; do
                case $t in
                tests/gpu_starts.sh) export_script "$id" ;;
                *) cp "$t" "$export_dir/$id/" ;;
                esac
            done
            printf '%-20s exported (%s)\n' "$id" "$tests"
            exported=$((exported + 1))
            cp "$work/orig" "../$file"
            touch "../$file"
            continue
        fi
        # shellcheck disable=SC2086
        make check TESTS="$tests" >"$work/mutant.log" 2>&1
        fails=$(failures "$work/mutant.log" | LC_ALL=C comm -23 - "$work/base.fails" | grep -c .)
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
if [ -n "$export_dir" ]; then
    echo "$exported exported to $export_dir, $other not built"
    [ "$other" -eq 0 ]
    exit
fi
echo "$caught caught, $missed missed, $other not run, $skipped GPU mutants not run here"
[ "$missed" -eq 0 ] && [ "$other" -eq 0 ]
