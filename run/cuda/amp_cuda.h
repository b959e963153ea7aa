/* C interface to amped's CUDA code. The .cu files export only these
 * extern "C" functions, so everything else in run/ stays plain C. */
#ifndef AMP_CUDA_H
#define AMP_CUDA_H

#include <stddef.h>

#include "amp_comm.h"
#include "amp_core.h"
#include "amp_gcp.h"
#include "amp_group.h"
#include "gpu_run.h"
#include "stream_pack.h"
#include "amp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amp_cuda_device {
    int ordinal;
    char name[256];
    int cc_major, cc_minor;      /* compute capability */
    int sm_count;
    size_t total_memory, free_memory;
    int pci_bus, pci_device;
    unsigned char uuid[16];      /* the same GPU whatever a process calls it */
} amp_cuda_device;

/* Up to max devices into out; *count gets how many there are. Fails with
 * AMP_ERR_NO_DEVICE when the runtime finds none (or no driver). */
amp_status amp_cuda_list_devices(amp_cuda_device *out, int max, int *count, amp_error *err);
/* The count alone (the same failures), and one device described: unlike
 * listing, neither makes a context on every device (a process of several
 * touches only its own GPUs). */
amp_status amp_cuda_device_count(int *count, amp_error *err);
amp_status amp_cuda_describe_device(int ordinal, amp_cuda_device *out, amp_error *err);

/* Runtime and driver versions as "13.0 (driver 13.0)". */
void amp_cuda_version_string(char *buf, size_t n);

/* Run a trivial kernel on device ordinal and check its result: proves the
 * build's machine code (or PTX) runs on this GPU. */
amp_status amp_cuda_selftest(int ordinal, amp_error *err);

/* ---- MTTKRP on one GPU (mttkrp.cu) ------------------------------------- */

/* A tensor's mode copies resident on one device. */
typedef struct amp_gpu_tensor amp_gpu_tensor;

/* chunk_nnz 0: every copy resident in device memory. Else streamed: each
 * copy is packed into the stream layout where its values allow (8 bytes
 * a nonzero, see amp_stream_pack), else its words and values stay in t's
 * host memory (t must outlive g); either is page-locked here, and every
 * MTTKRP copies it in chunks of chunk_nnz nonzeros through a ring of
 * device buffers while it computes. */
amp_status amp_gpu_tensor_upload(int device, const amp_tensor *t, uint64_t chunk_nnz,
                                 amp_gpu_tensor **g, amp_error *err);

/* What an upload reports beyond its status; NULL where nothing is asked. */
typedef struct amp_gpu_upload_opts {
    /* Called from the uploading thread with the bytes of words and values
     * (the host copies', nnz x (8 + value size) a copy in all) just
     * moved: over the link when resident, packed and page-locked when
     * streamed. */
    void (*progress)(void *ctx, uint64_t bytes);
    void *progress_ctx;
    /* Tests: the last of a resident tensor's device allocations fails as
     * if another process had taken the memory. */
    int fail_alloc;
    /* Out: set when the upload failed (AMP_ERR_NOMEM) because a device
     * allocation of the tensor found the GPU's memory taken; what was
     * allocated is freed, and the device can be used again. */
    int device_full;
} amp_gpu_upload_opts;

/* amp_gpu_tensor_upload with uo (may be NULL). */
amp_status amp_gpu_tensor_upload_with(int device, const amp_tensor *t, uint64_t chunk_nnz,
                                      amp_gpu_upload_opts *uo, amp_gpu_tensor **g,
                                      amp_error *err);
/* Resident, straight from the file: `threads` threads (at least 1) read,
 * check and decompress the chunks and stage them to the device while
 * the link carries the ones before, so the tensor is never whole in host
 * memory. t: f's layout (amp_tensor_load_layout) or more. progress: the
 * file's bytes read; uo (may be NULL): its fail_alloc and device_full. */
amp_status amp_gpu_tensor_upload_file(int device, const amp_file *f, const amp_tensor *t,
                                      int threads, amp_load_progress_fn progress,
                                      void *progress_ctx, amp_gpu_upload_opts *uo,
                                      amp_gpu_tensor **g, amp_error *err);
/* Streamed from compressed chunks: the file's chunks of every copy are
 * read, checked and kept as stored (compressed) in host memory, and each
 * MTTKRP decodes them on `threads` CPU threads into page-locked slots on
 * their way to the device ring (chunks of up to amp_gpu_file_chunk_nnz
 * nonzeros, the file's largest). For a host that cannot hold the tensor
 * decompressed. t: f's layout or more. */
amp_status amp_gpu_tensor_upload_compressed(int device, const amp_file *f, const amp_tensor *t,
                                            int threads, amp_load_progress_fn progress,
                                            void *progress_ctx, amp_gpu_tensor **g,
                                            amp_error *err);
/* Two copies remapped (FLYCOO, remap.cu; run/core/remap.c has the
 * design): of a whole tensor t (not a part of several GPUs, at most
 * 2^32 - 1 nonzeros), copy 0 and one spare buffer as large on the device,
 * every copy's block table, and every mode's positions pos[d] (t->nnz
 * entries each: amp_remap_positions, narrowed; copied, so the caller may
 * free them). Every MTTKRP of mode d makes copy d from the last one made
 * where no buffer holds it; amp_gpu_remap_next makes the next one ahead.
 * t may be freed after. uo: as amp_gpu_tensor_upload_with's. */
amp_status amp_gpu_tensor_upload_remap(int device, const amp_tensor *t,
                                       const uint32_t *const *pos, amp_gpu_upload_opts *uo,
                                       amp_gpu_tensor **g, amp_error *err);
int amp_gpu_tensor_remapped(const amp_gpu_tensor *g);
/* Two copies remapped: once the work queued on stream (NULL: the default
 * stream) is done with copy d, which a buffer must hold, copy (d + 1) mod
 * N written from it into the other buffer (nothing where a buffer holds
 * it already), on the tensor's remap stream: the kernel runs while the
 * caller goes on. */
amp_status amp_gpu_remap_next(const amp_gpu_tensor *g, unsigned d, void *stream,
                              amp_error *err);
/* Two copies remapped: whether CP-ALS's MTTKRPs write the next copy
 * themselves (fused, the default; f64 values and the team kernel only)
 * or leave it to a remap kernel after them (for comparing the two), and
 * how many copies they wrote so. */
void amp_gpu_remap_set_fuse(amp_gpu_tensor *g, int on);
unsigned amp_gpu_remap_fused(const amp_gpu_tensor *g);
/* GPU time of the remap kernels so far, and how many (0 and 0 unless two
 * copies remapped; fused remaps are the MTTKRP's time, not counted here);
 * waits for any still running. */
amp_status amp_gpu_remap_seconds(const amp_gpu_tensor *g, double *seconds, unsigned *count,
                                 amp_error *err);
/* Resident copy d into host arrays (nnz words, nnz values of the tensor's
 * type) as the device holds it; two copies remapped: only a copy a buffer
 * holds now (AMP_ERR_USAGE otherwise), once its remap is done. */
amp_status amp_gpu_copy_download(const amp_gpu_tensor *g, unsigned d, uint64_t *words,
                                 void *vals, amp_error *err);
uint64_t amp_gpu_file_chunk_nnz(const amp_file *f);
int amp_gpu_tensor_compressed(const amp_gpu_tensor *g);
/* Host bytes the tensor holds for its device: the compressed chunks and
 * the slots (0 unless streamed from compressed chunks). */
size_t amp_gpu_tensor_host_bytes(const amp_gpu_tensor *g);
int amp_gpu_tensor_streamed(const amp_gpu_tensor *g);
/* Bytes a streamed tensor moves to the device per MTTKRP of every mode:
 * 8 per nonzero for copies in the stream layout, 12 or 16 for the rest. */
double amp_gpu_stream_bytes(const amp_gpu_tensor *g);
/* Device bytes of the streaming ring for chunk_nnz nonzeros a chunk. */
size_t amp_gpu_ring_bytes(const amp_tensor *t, uint64_t chunk_nnz);
void amp_gpu_tensor_free(amp_gpu_tensor *g);
size_t amp_gpu_tensor_bytes(const amp_gpu_tensor *g);
/* Whether mode d's copy is resident with a nonzero in every row of its
 * range, so that its MTTKRP writes M without zeroing it first. */
int amp_gpu_tensor_gapless(const amp_gpu_tensor *g, unsigned d);
/* A resident copy ordered by row is cut, at load, at AMP_GPU_CUTS - 1
 * row boundaries into ranges of about equal nonzeros; several GPUs
 * solve and send a mode's rows range by range as its MTTKRP finishes
 * each (als_gpu.cu), in up to this many parts. */
#define AMP_GPU_CUTS 8

/* Whether mode d's copy is cut into AMP_GPU_CUTS ranges of rows (of about
 * equal nonzeros); if so, row_cut[0 .. AMP_GPU_CUTS] gets the first row
 * of each range and the end of the last. */
int amp_gpu_tensor_cuts(const amp_gpu_tensor *g, unsigned d, uint64_t *row_cut);
/* For the tests: `bytes` of a pattern copied to the device through the
 * page-locked staging that amp_gpu_tensor_upload uses, then back and
 * compared. */
amp_status amp_gpu_upload_check(int device, size_t bytes, amp_error *err);

/* The MTTKRP over fibers (mttkrp_fibers.cu, issue 45) for the resident
 * copies that have a fiber level (amp_copy.has_fibers), on or off (the
 * default: it has not yet run on a GPU); the others keep mttkrp.cu's
 * kernel. Returns whether any copy of g takes it. */
int amp_gpu_tensor_fibers(amp_gpu_tensor *g, int on);

/* M = MTTKRP(d) on device memory: A[m] rows[m] x rank and M rows[d] x rank,
 * row-major, f32 when f32 is set, else f64; rank 1 to AMP_GPU_MAX_RANK
 * (amp_core.h). stream: a cudaStream_t, NULL for the default stream. */
amp_status amp_gpu_mttkrp(const amp_gpu_tensor *g, unsigned d, void *const *A, unsigned rank,
                          int f32, void *M, void *stream, amp_error *err);

/* A part's copy in two groups (amp_copy.early_nnz): AMP_GPU_EARLY zeroes
 * M's rows and adds the first, AMP_GPU_LATE adds the second, AMP_GPU_ALL
 * (what amp_gpu_mttkrp does) both. */
enum { AMP_GPU_ALL = 0, AMP_GPU_EARLY, AMP_GPU_LATE };
amp_status amp_gpu_mttkrp_group(const amp_gpu_tensor *g, unsigned d, void *const *A, unsigned R,
                                int f32, void *M, int group, void *stream, amp_error *err);

/* A streamed tensor (not from compressed chunks): copy d's first chunks
 * of its first group, as many as the ring holds, queued on the copy
 * stream now, so the link works while the GPU finishes what was queued
 * before (an iteration's last update and fit); the next MTTKRP of that
 * range uses them. Nothing for a resident tensor. */
amp_status amp_gpu_prefetch(const amp_gpu_tensor *g, unsigned d, amp_error *err);

/* Nonzeros [cut first, cut last) of a resident copy cut at load
 * (amp_gpu_tensor_cuts), which write exactly the rows between the two
 * cuts; cut 0 zeroes what the ranges do not write. waves: blocks launched
 * per block that fits at once (1: a grid that fits). */
amp_status amp_gpu_mttkrp_cuts(const amp_gpu_tensor *g, unsigned d, void *const *A, unsigned R,
                               int f32, void *M, unsigned first, unsigned last, unsigned waves,
                               void *stream, amp_error *err);

/* From host f64 factors: M_host (if not NULL) gets MTTKRP(d) in f64; with
 * rounds > 0, mode_seconds[m] gets the mean time of one MTTKRP of each
 * mode over that many launches. */
amp_status amp_gpu_mttkrp_host(const amp_gpu_tensor *g, const double *const *A, unsigned rank,
                               int f32, unsigned d, double *M_host, unsigned rounds,
                               double *mode_seconds, amp_error *err);

/* The same M from amp_gpu_mttkrp_cuts in `parts` ranges (1 to
 * AMP_GPU_CUTS), for tests; mode d's copy must be cut. only >= 0: range
 * `only` of them alone, into an M that starts as NaN, after the zeroing
 * the first range does in a copy that is not gapless (rows it does not
 * write then read back as 0, else as NaN). */
amp_status amp_gpu_mttkrp_cuts_host(const amp_gpu_tensor *g, const double *const *A, unsigned R,
                                    int f32, unsigned d, unsigned parts, int only,
                                    unsigned waves, double *M_host, amp_error *err);

/* The fused solve of CP-ALS (als_solve.cu) on host arrays, for tests: A
 * = M P (rows x R, P R x R, row-major; M rounded to f32 first when m_f32),
 * A32 (when not NULL) the same in f32, and stats = [column sums of squares
 * of A | sums of A .* M | max |A|], each R long. Rank 1 to
 * AMP_GPU_SOLVE_MAX_RANK (als_kernels.h), the fused solve's own limit. */
amp_status amp_gpu_solve_stats_host(int device, const double *M, int m_f32, const double *P,
                                    uint64_t rows, unsigned R, double *A, float *A32,
                                    double *stats, amp_error *err);

/* The constrained methods' row update (constrained.cu) on host arrays,
 * for tests: what amp_gpu_update (als_kernels.h) holds besides its device
 * pointers. */
typedef struct amp_gpu_update_opts {
    amp_method method;      /* AMP_METHOD_ADMM, _MU or _HALS */
    amp_mode_rule rule;
    unsigned rank, inner;   /* inner: AO-ADMM's inner iterations, the most */
    double admm_tol;
    int generic;            /* 1: the generic kernel even at rank <= 32 */
    const double *scale;    /* R column scales (host) A and U are read at, or NULL */
} amp_gpu_update_opts;
/* A (rows x R) updated in place from M, with V (R x R, host) uploaded and,
 * for AO-ADMM, rho and P = (V + rho I)^-1 formed on the device
 * (amp_gpu_admm_shift, cuSOLVER) and U (rows x R, updated; NULL
 * otherwise) the dual. *rho and P (R x R; either may be NULL) get
 * AO-ADMM's rho and P from the device. The device rows sit between two
 * guard rows that must come back untouched (AMP_ERR_INTERNAL if not).
 * Rank 1 to AMP_GPU_MAX_RANK, else AMP_ERR_USAGE. */
amp_status amp_gpu_update_rows_host(int device, const amp_gpu_update_opts *o, const double *V,
                                    const double *M, double *A, double *U, uint64_t rows,
                                    double *rho, double *P, amp_error *err);

/* ---- CP-ALS on one GPU or several (als_gpu.cu) ---------------------------- */

/* CP-ALS with the tensor on g's device, from c's factors (host, f64), with
 * the CPU backend's algorithm, stopping rule and outputs: c gets the
 * factors, lambda, fit and iterations, and c->seconds the GPU time of each
 * phase. t supplies |X|^2. */
amp_status amp_gpu_cpd_als(const amp_gpu_tensor *g, const amp_tensor *t, const amp_cpd_opts *o,
                           amp_cpd *c, amp_error *err);

/* Per GPU of a run (of this process), summed over the iterations, in
 * seconds of GPU time. */
typedef struct amp_gpu_run_stats {
    unsigned ngpus, nmodes;
    double phase[AMP_MAX_GPUS][AMP_NPHASES];
    double mttkrp[AMP_MAX_GPUS][AMP_MAX_MODES];   /* each mode's MTTKRP */
    double busy[AMP_MAX_GPUS][AMP_MAX_MODES];     /* each mode's update but its collectives */
    double comm[AMP_MAX_GPUS][AMP_MAX_MODES];     /* in collectives, waiting included */
    /* Sending and receiving the mode's updated rows, behind the next
     * mode's MTTKRP: only what that MTTKRP waited for is in comm. */
    double exchange[AMP_MAX_GPUS][AMP_MAX_MODES];
    /* Waiting for the slowest GPU: from reaching the mode's first
     * collective to the moment the last GPU reached it. */
    double idle[AMP_MAX_GPUS][AMP_MAX_MODES];
    /* Parts each mode's rows were solved and sent in at its last update
     * (1: whole, after the solve; 0: at the end of the update, as on the
     * first iteration and with overlap). */
    unsigned parts[AMP_MAX_MODES];
} amp_gpu_run_stats;

/* CP-ALS on p->ngpus GPUs, one host thread each (the caller's is GPU 0's,
 * which calls o->on_iter): g[i] holds GPU i's part of t (amp_partition_tensor),
 * comms[i] its communicator. c's factors are in the run's row order on the
 * way in and out (amp_partition_rows_to_run / _to_file), normalized. Each
 * GPU solves the rows it owns (stored unnormalized, with column scales
 * that every GPU computes alike, als_gpu.cu); column norms, fit terms and Gram
 * matrices are summed across GPUs and the updated rows sent to every GPU,
 * so all hold every factor. c->seconds gets the largest GPU time of each
 * phase; stats (if not NULL) every GPU's.
 *
 * group: NULL, or the processes of a run over several (MPI), every one
 * calling this at once with the same p, which deals over every GPU of
 * every process, p->ngpus / group->size of them each: this process's are
 * GPUs rank x that .. of the run, g[i] and comms[i] (joined over all of
 * them, amp_comm_init_ranks) and stats the i-th of them. Every process
 * ends with the factors in c; the group carries what the host must share
 * (the parts' cuts, the idle times). */
amp_status amp_gpu_cpd_als_multi(amp_gpu_tensor *const *g, amp_comm *const *comms,
                                 const amp_partition *p, const amp_group *group,
                                 const amp_tensor *t, const amp_cpd_opts *o,
                                 const amp_gpu_als_opts *go, amp_cpd *c,
                                 amp_gpu_run_stats *stats, amp_error *err);

/* Several models in one pass on g's device (amp_gpu_run_als_batch, which
 * says what it does); cs's factors in the tensor's row order. */
amp_status amp_gpu_cpd_als_batch(const amp_gpu_tensor *g, const amp_tensor *t,
                                 const amp_cpd_opts *o, unsigned K, amp_cpd *const *cs,
                                 amp_gpu_batch_fn on_iter, void *ctx, double *mttkrp_seconds,
                                 amp_error *err);

/* ---- CP-APR on one GPU or several (apr.cu) -------------------------------- */

/* CP-APR (Poisson CP, o->method AMP_METHOD_APR) with the tensor on g's
 * device: run/cpu/apr.c's algorithm from c's factors (host, f64; c->lambda
 * is not read: the start is normalized into lambda, as there), o->apr's
 * options and o->tol the KKT tolerance, the same outputs (c->loglik, kkt,
 * inner_iters before each o->on_iter, fit = loglik, iters, converged,
 * stopped after o->stop asks) and c->seconds the GPU time of each phase
 * (MTTKRP: the Phi passes with their KKT violation; UPDATE: shifts and
 * updates; NORMALIZE; FIT: the log-likelihood; COMM: between GPUs). Phi
 * and the gathered rows in f32 under AMP_PRECISION_F32, everything else
 * f64. g resident, streamed or from compressed chunks; two copies
 * remapped are refused (AMP_ERR_UNSUPPORTED). stats (NULL, or the one
 * GPU's): phase, and per mode mttkrp (the Phi passes), busy, and on
 * several GPUs comm and exchange. amp_gpu_cpd_als calls it for
 * AMP_METHOD_APR. */
amp_status amp_gpu_cpd_apr(const amp_gpu_tensor *g, const amp_cpd_opts *o, amp_cpd *c,
                           amp_gpu_run_stats *stats, amp_error *err);

/* ---- CP completion on one GPU (completion.cu) ---------------------------- */

/* The largest rank completion takes on the GPU: a row's packed system and
 * its k (R (R + 1) / 2 + 2 R + 1 doubles) in one warp's shared memory. */
#define AMP_GPU_COMPLETION_MAX_RANK 64u

/* CP completion (o->completion.observed AMP_OBSERVED_NONZEROS) with the
 * tensor on g's device: run/cpu/completion.c's algorithm from c's factors
 * and lambda (host, f64), the same outputs (c->completion and c->fit
 * before each o->on_iter, iters, converged, stopped) and c->seconds the
 * GPU time of each phase (MTTKRP: the fused pass that builds and solves
 * the rows' systems; NORMALIZE; FIT: the residuals; COMM on several
 * GPUs). t: the whole tensor as the host holds it (its relabelling draws
 * the holdout, its nnz counts the training entries; layout only is
 * enough). The gathered rows and k k^T's products in f32 under
 * AMP_PRECISION_F32, every sum and the solve f64. g resident, streamed
 * or from compressed chunks; two copies remapped are refused
 * (AMP_ERR_UNSUPPORTED); ranks 1 to AMP_GPU_COMPLETION_MAX_RANK. */
amp_status amp_gpu_cpd_completion(const amp_gpu_tensor *g, const amp_tensor *t,
                                  const amp_cpd_opts *o, amp_cpd *c,
                                  amp_gpu_run_stats *stats, amp_error *err);
/* The same on p->ngpus GPUs of this process (p NULL: g[0] alone), as
 * amp_gpu_cpd_apr_multi runs CP-APR, which amp_gpu_cpd_als_multi calls
 * it like: one host thread a GPU, g[i] GPU i's part of an owner-computes
 * partition (equal-nnz refused), comms[i] its communicator, c's factors
 * in the run's row order on the way in and out. Each GPU builds and
 * solves the systems of the rows it owns; each mode's rows go to every
 * GPU before it is normalized; the residual sums and kept-row counts are
 * added in GPU order (completion.cu), so every GPU ends with the same
 * factors. group: NULL or of one process (several are refused). go: only
 * fail_gpu and fail_iter are read (as amp_gpu_cpd_apr_multi's). */
amp_status amp_gpu_cpd_completion_multi(const amp_gpu_tensor *const *g, amp_comm *const *comms,
                                        const amp_partition *p, const amp_group *group,
                                        const amp_tensor *t, const amp_cpd_opts *o,
                                        const amp_gpu_als_opts *go, amp_cpd *c,
                                        amp_gpu_run_stats *stats, amp_error *err);
/* ---- GCP on one GPU (gcp.cu) ---------------------------------------------- */

/* GCP-Adam (run/cpu/gcp.c's algorithm, the same draws) on CUDA device
 * `device`, t in host memory. Resident (stream 0): its form for the
 * sampler (amp_gcp_source: keys and values, 16 bytes a nonzero, and the
 * row tables) built on the host and resident on the device with the
 * factors, Adam's moments and the epoch's saved copies (7 R sum(rows)
 * doubles). Streamed (stream 1): each step's samples drawn on the host
 * and uploaded, the device holding no nonzero (but for the exact loss,
 * where it is taken). c as amp_cpu_gcp leaves it; c->seconds the GPU
 * time of each phase (MTTKRP: sampling and the gradient; UPDATE: Adam;
 * FIT: the estimate and the exact loss). */
amp_status amp_gpu_gcp(int device, const amp_tensor *t, const amp_cpd_opts *o, int stream,
                       amp_cpd *c, amp_error *err);
/* Whether a resident run of rank R on t fits in the device's free
 * memory (with a tenth to spare): --memory auto streams where not. */
amp_status amp_gpu_gcp_fits(int device, const amp_tensor *t, unsigned R, int *fits,
                            amp_error *err);
/* The pieces on the device, from and to host memory, for the tests
 * against run/cpu/gcp.c's (amp_cpu_gcp_gradient, _estimate, _exact). */
amp_status amp_gpu_gcp_gradient_host(int device, const amp_gcp_view *v, const double *const *A,
                                     unsigned R, amp_gcp_loss loss, double delta,
                                     const amp_gcp_batch *b, double *const *G, amp_error *err);
amp_status amp_gpu_gcp_estimate_host(int device, const amp_gcp_view *v, const double *const *A,
                                     unsigned R, amp_gcp_loss loss, double delta,
                                     const amp_gcp_batch *b, double *est, double *se,
                                     amp_error *err);
amp_status amp_gpu_gcp_exact_host(int device, const amp_gcp_view *v, const double *const *A,
                                  unsigned R, amp_gcp_loss loss, double delta, int kind,
                                  double *loss_out, amp_error *err);
/* amp_cpu_gcp_steps on the device: the same steps, dense or lazy Adam. */
amp_status amp_gpu_gcp_steps_host(int device, const amp_gcp_view *v, double *const *A,
                                  double *const *M, double *const *V, unsigned R,
                                  amp_gcp_loss loss, double delta, amp_gcp_adam adam,
                                  const amp_gcp_batch *b, unsigned steps, uint64_t t0,
                                  double rate, double lower, amp_error *err);
/* CP-APR on p->ngpus GPUs (p NULL: g[0] alone), as amp_gpu_cpd_als_multi
 * runs CP-ALS, which calls it for AMP_METHOD_APR: one host thread a GPU
 * (the caller's is GPU 0's, which calls o->on_iter and writes c), g[i]
 * GPU i's part of an owner-computes partition (equal-nnz is refused),
 * comms[i] its communicator, c's factors in the run's row order on the
 * way in and out; group NULL or the processes of a run over several, as
 * there. Each GPU updates the rows it owns; the KKT violation's max is
 * taken over every GPU after each inner iteration, each mode's rows go to
 * every GPU before it is normalized, and the log-likelihood's partials
 * are added in GPU order (apr.cu), so every GPU (and process) ends with
 * the same factors in c. go: only fail_gpu and fail_iter are read (a
 * failure injected before mode 2 of that outer iteration). */
amp_status amp_gpu_cpd_apr_multi(const amp_gpu_tensor *const *g, amp_comm *const *comms,
                                 const amp_partition *p, const amp_group *group,
                                 const amp_cpd_opts *o, const amp_gpu_als_opts *go, amp_cpd *c,
                                 amp_gpu_run_stats *stats, amp_error *err);

/* Device bytes a decomposition of t at this rank by this method needs:
 * the factors, their f32 shadows, the MTTKRP output and scratch (and
 * AO-ADMM's duals, a constrained f32 run's f64 M), plus the mode copies
 * when resident (chunk_nnz 0) or the streaming ring and block keys. */
size_t amp_gpu_als_bytes(const amp_tensor *t, unsigned rank, int f32, amp_method method,
                         uint64_t chunk_nnz);

#ifdef __cplusplus
}
#endif
#endif
