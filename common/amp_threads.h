/* OpenMP thread counts and the split of n items over threads, for every
 * library: the same split everywhere makes per-thread results combine in
 * one fixed order, so parallel runs are the same bit for bit for the same
 * thread count. Builds without OpenMP see one thread. */
#ifndef AMP_THREADS_H
#define AMP_THREADS_H

#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static inline int amp_max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* threads when positive, else the OpenMP default (1 without OpenMP). */
static inline int amp_thread_count(int threads)
{
#ifdef _OPENMP
    return threads > 0 ? threads : omp_get_max_threads();
#else
    (void)threads;
    return 1;
#endif
}

/* threads when positive becomes the default team size (amp_max_threads)
 * of the parallel regions that follow; 0 leaves the OpenMP default. */
static inline void amp_set_threads(int threads)
{
#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads(threads);
#else
    (void)threads;
#endif
}

/* The calling thread's number in its parallel region, and the region's
 * size (0 and 1 outside one). */
static inline int amp_thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int amp_thread_num(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* Where part `me` of nt equal parts of n items starts (part nt: n). */
static inline uint64_t amp_part_start(uint64_t n, int me, int nt)
{
    return n * (uint64_t)me / (uint64_t)nt;
}

/* This thread's share [*lo, *hi) of n items in a parallel region, in
 * thread order, so per-thread results can be combined deterministically. */
static inline void amp_thread_range(uint64_t n, int *tid, int *nt, uint64_t *lo, uint64_t *hi)
{
    *tid = amp_thread_id();
    *nt = amp_thread_num();
    *lo = amp_part_start(n, *tid, *nt);
    *hi = amp_part_start(n, *tid + 1, *nt);
}

/* Per-thread counts, counts[q * nbuckets + b] for thread q of nt, turned
 * into where each thread's entries of each bucket start: bucket by bucket,
 * threads in order within a bucket, so that a scatter over the threads'
 * amp_thread_range slices is stable. */
static inline void amp_bucket_offsets(uint64_t *counts, int nt, uint64_t nbuckets)
{
    uint64_t at = 0;
    for (uint64_t b = 0; b < nbuckets; b++)
        for (int q = 0; q < nt; q++) {
            uint64_t c = counts[(uint64_t)q * nbuckets + b];
            counts[(uint64_t)q * nbuckets + b] = at;
            at += c;
        }
}

#endif
