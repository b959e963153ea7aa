/* How a GPU holds its part, decided from sizes alone (run/cuda/
 * memory_plan.c): the device bytes of every copy resident against two
 * copies remapped, per nonzero as run/core/remap.c's header works them
 * out, and the order --memory auto tries (every copy resident, else two
 * remapped, else streamed). Needs no GPU. */
#include <config.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_run.h"
#include "tap.h"

/* Bytes a nonzero, over many nonzeros: the per-array words vanish. */
static double per_nnz(int memory, unsigned nmodes, size_t vsize)
{
    const uint64_t nnz = UINT64_C(1) << 30;
    return (double)amp_memory_tensor_bytes(memory, nmodes, nnz, vsize) / (double)nnz;
}

static void bytes_per_nonzero(void)
{
    /* {modes, value size, resident, remap} */
    static const struct {
        unsigned n;
        size_t v;
        double resident, remap;
    } cases[] = {
        {3, 8, 48, 44}, {4, 8, 64, 48}, {5, 8, 80, 52}, {6, 8, 96, 56},
        {3, 4, 36, 36}, {4, 4, 48, 40}, {5, 4, 60, 44}, {2, 8, 32, 40},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double res = per_nnz(AMP_MEMORY_RESIDENT, cases[i].n, cases[i].v);
        double rem = per_nnz(AMP_MEMORY_REMAP, cases[i].n, cases[i].v);
        ok(res > cases[i].resident - 1e-6 && res < cases[i].resident + 1e-6 &&
               rem > cases[i].remap - 1e-6 && rem < cases[i].remap + 1e-6,
           "%u modes, %s values: %.0f bytes a nonzero with every copy resident, %.0f with two "
           "remapped (want %.0f and %.0f)", cases[i].n, cases[i].v == 8 ? "f64" : "f32", res,
           rem, cases[i].resident, cases[i].remap);
    }
    /* Exact, as the GPU allocates: a word beyond each array. */
    is_u64(amp_memory_tensor_bytes(AMP_MEMORY_RESIDENT, 3, 1000, 8), 3 * (1000 * 16 + 16),
           "3 copies of 1000 f64 nonzeros: 3 (16 nnz + 16) bytes");
    is_u64(amp_memory_tensor_bytes(AMP_MEMORY_REMAP, 3, 1000, 8),
           2 * (1000 * 16 + 16) + 3 * (1000 * 4 + 8),
           "two of them remapped: 2 (16 nnz + 16) + 3 (4 nnz + 8) bytes");
    is_u64(amp_memory_tensor_bytes(AMP_MEMORY_STREAM, 3, 1000, 8), 0,
           "streamed: no copy on the device");
}

/* A plan's inputs, the answer wanted and why. */
typedef struct plan_case {
    int asked;
    amp_memory_sizes s;
    int want;
    const char *why;
} plan_case;

static void choices(void)
{
    static const plan_case cases[] = {
        {AMP_MEMORY_AUTO, {100, 90, 80, 1}, AMP_MEMORY_RESIDENT,
         "every copy fits: resident, though two remapped are smaller"},
        {AMP_MEMORY_AUTO, {100, 100, 80, 1}, AMP_MEMORY_RESIDENT,
         "every copy fits exactly: resident"},
        {AMP_MEMORY_AUTO, {100, 101, 80, 1}, AMP_MEMORY_REMAP,
         "every copy does not fit, two remapped do: remap"},
        {AMP_MEMORY_AUTO, {100, 150, 100, 1}, AMP_MEMORY_REMAP, "two remapped fit exactly: remap"},
        {AMP_MEMORY_AUTO, {100, 101, 80, 0}, AMP_MEMORY_STREAM,
         "two remapped fit, but the file holds no positions: stream (computing them costs more)"},
        {AMP_MEMORY_REMAP, {100, 101, 80, 0}, AMP_MEMORY_REMAP,
         "remap asked for, no positions in the file: remap (computed at load)"},
        {AMP_MEMORY_AUTO, {100, 90, 80, 0}, AMP_MEMORY_RESIDENT,
         "every copy fits, no positions in the file: resident"},
        {AMP_MEMORY_AUTO, {100, 150, 101, 1}, AMP_MEMORY_STREAM, "neither fits: stream"},
        {AMP_MEMORY_AUTO, {100, 150, 0, 1}, AMP_MEMORY_STREAM,
         "no remap possible (several GPUs, 2^32 nonzeros): stream"},
        {AMP_MEMORY_AUTO, {0, 1, 1, 1}, AMP_MEMORY_STREAM, "nothing offered: stream (the plan fails)"},
        {AMP_MEMORY_REMAP, {100, 50, 200, 1}, AMP_MEMORY_REMAP,
         "remap asked for: remap, fitting or not (the plan says)"},
        {AMP_MEMORY_RESIDENT, {100, 150, 80, 1}, AMP_MEMORY_RESIDENT,
         "resident asked for: resident, fitting or not"},
        {AMP_MEMORY_STREAM, {100, 50, 40, 1}, AMP_MEMORY_STREAM, "stream asked for: stream"},
        {AMP_MEMORY_COMPRESSED, {100, 50, 40, 1}, AMP_MEMORY_COMPRESSED,
         "compressed asked for: compressed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = amp_memory_choose(cases[i].asked, &cases[i].s);
        is_int(got, cases[i].want, "--memory %s, %" PRIu64 " offered, %" PRIu64 " resident, %"
               PRIu64 " remapped, positions %sin the file: %s", amp_memory_name(cases[i].asked),
               cases[i].s.avail, cases[i].s.resident, cases[i].s.remap,
               cases[i].s.remap_in_file ? "" : "not ", cases[i].why);
    }
    /* The bench's 5-mode case (bench/bench-gpu.sh): 200 M f64 nonzeros,
     * 14 GB offered with 1 GB of factors and scratch: every copy (16 GB)
     * does not fit, two remapped (10.4 GB) do. */
    const uint64_t nnz = 200000000, other = UINT64_C(1) << 30;
    amp_memory_sizes s = {UINT64_C(14) << 30,
                          amp_memory_tensor_bytes(AMP_MEMORY_RESIDENT, 5, nnz, 8) + other,
                          amp_memory_tensor_bytes(AMP_MEMORY_REMAP, 5, nnz, 8) + other, 1};
    is_int(amp_memory_choose(AMP_MEMORY_AUTO, &s), AMP_MEMORY_REMAP,
           "5 modes, 200 M f64 nonzeros in 14 GiB: remap (%.1f GB resident, %.1f remapped)",
           s.resident / 1e9, s.remap / 1e9);
}

/* The report's "not for auto" note: only where the missing positions
 * alone made auto stream. */
static void skipped(void)
{
    static const plan_case cases[] = {
        {AMP_MEMORY_AUTO, {100, 101, 80, 0}, 1, "two remapped fit, every copy does not: skipped"},
        {AMP_MEMORY_AUTO, {100, 101, 80, 1}, 0, "the same with positions: remapped"},
        {AMP_MEMORY_AUTO, {100, 90, 80, 0}, 0, "every copy fits: resident, nothing skipped"},
        {AMP_MEMORY_AUTO, {100, 150, 101, 0}, 0, "neither fits: streamed anyway"},
        {AMP_MEMORY_AUTO, {100, 150, 0, 0}, 0, "no remap possible: streamed anyway"},
        {AMP_MEMORY_REMAP, {100, 101, 80, 0}, 0, "remap asked for: not auto's choice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        is_int(amp_memory_remap_skipped(cases[i].asked, &cases[i].s), cases[i].want,
               "remap skipped for want of positions? --memory %s, %" PRIu64 " offered, %" PRIu64
               " resident, %" PRIu64 " remapped, positions %sin the file: %s",
               amp_memory_name(cases[i].asked), cases[i].s.avail, cases[i].s.resident,
               cases[i].s.remap, cases[i].s.remap_in_file ? "" : "not ", cases[i].why);
}

int main(void)
{
    plan(8 + 3 + 14 + 1 + 6 + 5);
    bytes_per_nonzero();
    choices();
    skipped();
    static const char *const names[] = {"auto", "resident", "stream", "compressed", "remap"};
    for (int m = 0; m < 5; m++)
        is_str(amp_memory_name(m), names[m], "AMP_MEMORY_* %d is --memory %s", m, names[m]);
    return done_testing();
}
