/* MTTKRP on the CPU, straight from the BLCO words of a mode copy (checked
 * against the core's plain reference, run/core/mttkrp_ref.c). The kernel itself, its thread
 * mapping and its bytes model are in mttkrp_cpu_impl.h. */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amp_alloc.h"
#include "amp_cpu.h"
#include "amp_threads.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
/* AVX-512 and AVX2+FMA builds of the kernels beside the baseline one: the
 * binary stays portable and still uses the vector width the CPU has. */
#define AMP_KERNEL_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
/* And the register-sum kernels, one per vector width (mttkrp_cpu_impl.h). */
#define AMP_REG_KERNELS 1
#else
#define AMP_KERNEL_CLONES
#endif

/* The fewest nonzeros a fiber, on average over a copy, for which the
 * default walks fibers in f64 (amp_cpu_mttkrp_ws_fibers). On the 2-core
 * VM (bench/RESULTS.md, issue 45) the fiber kernel over the nonzero one
 * was 0.93 to 1.09 at 595 a fiber (within the noise), 0.94 at 7.2, 0.90
 * to 1.00 at 3: below this it loses, above it does no harm. */
#define AMP_CPU_FIBER_MIN_NNZ 16.0

struct amp_cpu_mttkrp_ws {
    int nthreads;
    unsigned rank;
    size_t stride;          /* rank rounded up to a cache line of doubles */
    size_t thread_bytes;    /* acc, tmp, two boundary rows and a fiber sum, per thread */
    void *scratch;
    uint64_t *slot_rows;    /* two per thread */
    size_t l2_bytes;        /* a core's L2: the kernel prefetches factors larger than half */
    int isa;                /* register sums: 4 AVX-512, 3 AVX2, 0 none (scratch row) */
    int fibers;             /* -1: where they pay (mttkrp_cpu_impl.h), 1: always, 0: never */
};

static int detect_isa(void)
{
#ifdef AMP_REG_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4"))
        return 4;
    if (__builtin_cpu_supports("x86-64-v3"))
        return 3;
#endif
    return 0;
}

int amp_cpu_mttkrp_ws_limit_isa(amp_cpu_mttkrp_ws *ws, int level)
{
    int found = detect_isa();
    ws->isa = level >= found ? found : level >= 3 ? 3 : 0;
    return ws->isa;
}

int amp_cpu_mttkrp_ws_fibers(amp_cpu_mttkrp_ws *ws, int mode)
{
    ws->fibers = mode < 0 ? -1 : mode > 0;
    return ws->fibers;
}

amp_status amp_cpu_mttkrp_ws_new(int threads, unsigned rank, amp_cpu_mttkrp_ws **out, amp_error *err)
{
    int T = amp_thread_count(threads);
    amp_cpu_mttkrp_ws *ws = calloc(1, sizeof *ws);
    if (ws == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    ws->nthreads = T;
    ws->rank = rank;
    long l2 = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    ws->l2_bytes = l2 > 0 ? (size_t)l2 : (size_t)1 << 20;
    ws->isa = detect_isa();
    ws->fibers = -1;
    ws->stride = ((size_t)rank + 15) / 16 * 16;
    /* acc, tmp, the two shared rows' slots and the fiber sum. */
    ws->thread_bytes = 5 * ws->stride * sizeof(double);
    ws->scratch = amp_alloc((size_t)T * ws->thread_bytes, "MTTKRP scratch", err);
    ws->slot_rows = malloc(2 * (size_t)T * sizeof *ws->slot_rows);
    if (ws->scratch == NULL || ws->slot_rows == NULL) {
        amp_cpu_mttkrp_ws_free(ws);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory for MTTKRP scratch");
    }
    *out = ws;
    return AMP_OK;
}

void amp_cpu_mttkrp_ws_free(amp_cpu_mttkrp_ws *ws)
{
    if (ws == NULL)
        return;
    amp_free(ws->scratch);
    free(ws->slot_rows);
    free(ws);
}

#define REAL double
#define SFX _f64
#include "mttkrp_cpu_impl.h"
#undef REAL
#undef SFX

#define REAL float
#define SFX _f32
#include "mttkrp_cpu_impl.h"
#undef REAL
#undef SFX

void amp_cpu_mttkrp_f64(const amp_tensor *t, unsigned d, const double *const *A,
                        unsigned rank, double *M, amp_cpu_mttkrp_ws *ws)
{
    mttkrp_f64(t, d, A, rank, M, ws);
}

void amp_cpu_mttkrp_f32(const amp_tensor *t, unsigned d, const float *const *A,
                        unsigned rank, float *M, amp_cpu_mttkrp_ws *ws)
{
    mttkrp_f32(t, d, A, rank, M, ws);
}
