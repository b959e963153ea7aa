/* Work for several GPUs: which GPU computes which nonzeros and owns which
 * factor rows, and each GPU's part of the tensor.
 *
 * Owner computes (the default, AMPED's sharding): per mode, the file's
 * shards are dealt largest first to the GPU with the fewest nonzeros so
 * far. A GPU writes only the output rows of its shards, so no two GPUs
 * ever add into the same row. The run renumbers each mode's rows so that
 * every GPU's rows are one contiguous range (its shards one after the
 * other, GPU 0 first); a part's BLCO words are re-encoded in that order.
 * Then solving, normalizing and exchanging a GPU's rows each touch one
 * range, and the exchange lands rows in place.
 *
 * Equal nonzeros (the ablation): each mode copy cut into equal ranges of
 * nonzeros whatever their rows; every GPU's partial MTTKRP covers every
 * row and is summed across GPUs (reduce-scatter), after which GPU g owns
 * row block g of ceil(rows / N) rows. Rows keep the file's order.
 *
 * Nothing here needs a GPU: the parts are ordinary amp_tensors. */
#ifndef AMP_PARTITION_H
#define AMP_PARTITION_H

#include <stdint.h>

#include "amp_cpd.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMP_MAX_GPUS 64

typedef enum amp_partition_kind {
    AMP_PARTITION_OWNER = 0,      /* shards dealt to GPUs, rows owned */
    AMP_PARTITION_EQUAL_NNZ       /* equal nonzero ranges, rows reduced */
} amp_partition_kind;

typedef struct amp_part_mode {
    uint32_t nshards;
    uint32_t *owner;                      /* GPU of each shard (owner computes) */
    uint64_t nnz[AMP_MAX_GPUS];           /* nonzeros each GPU computes */
    uint32_t nshards_of[AMP_MAX_GPUS];    /* shards each GPU holds */
    /* Rows each GPU solves and sends to the others, in run order. */
    uint64_t row_begin[AMP_MAX_GPUS], row_count[AMP_MAX_GPUS];
    uint64_t *run_row;                    /* file row -> run row; NULL: the same */
    uint64_t largest_shard;               /* nonzeros of the largest shard */
} amp_part_mode;

typedef struct amp_partition {
    amp_partition_kind kind;
    unsigned ngpus, nmodes;
    /* Set before amp_partition_tensor to order each part's copies in two
     * groups (see amp_copy.early_nnz) so that a mode's rows can travel
     * while the next mode's MTTKRP runs on the first group. */
    int overlap;
    /* How the parts find a row's run number: 0 by size (a per-shard map
     * where a mode's run_row table exceeds twice a core's L2, else the
     * table), 1 the map always, -1 the table always (tests compare). */
    int row_lookup;
    unsigned map_buckets;      /* the map's coarse table; 0: 65536 (tests: a few) */
    uint64_t rows[AMP_MAX_MODES];
    amp_part_mode modes[AMP_MAX_MODES];
} amp_partition;

/* Deal t's modes to ngpus GPUs (1 to AMP_MAX_GPUS). */
amp_status amp_partition_new(const amp_tensor *t, unsigned ngpus, amp_partition_kind kind,
                             amp_partition *p, amp_error *err);
void amp_partition_free(amp_partition *p);

/* Largest GPU's nonzeros over the mean, for mode m; *best (if not NULL)
 * gets a bound no dealing of the file's shards can beat: a shard is not
 * split, so the largest one over the mean when it exceeds it. */
double amp_partition_imbalance(const amp_partition *p, unsigned m, double *best);

/* GPU gpu's part of t as a tensor of its own (t is not changed and may be
 * freed after): per mode, the nonzeros that GPU computes, in the run's row
 * numbering, still ordered by output row; copies[d].row_begin/row_count
 * say which rows its MTTKRP writes. rows[], norm_sq and the value type are
 * t's; new_to_orig is not set. Free with amp_tensor_free. */
amp_status amp_partition_tensor(const amp_tensor *t, const amp_partition *p, unsigned gpu,
                                int threads, amp_tensor *part, amp_error *err);

/* Every GPU's part at once (parts[0 .. p->ngpus - 1]), built mode by mode;
 * the parts equal amp_partition_tensor's. release is NULL or t itself:
 * then each mode copy's words and values are freed (set NULL) as soon as
 * every part of that mode exists, so the peak is t plus one mode's parts;
 * t keeps its dimensions, rows, block tables and relabellings but can no
 * longer be read for nonzeros (t->bytes counts what is left). On failure
 * no part is left, and the modes released before it stay released. */
amp_status amp_partition_tensors(const amp_tensor *t, const amp_partition *p, int threads,
                                 amp_tensor *release, amp_tensor *parts, amp_error *err);

/* Factor rows (rows[m] x rank, row-major) from the file's order to the
 * run's and back; src and dst must not overlap. */
void amp_partition_rows_to_run(const amp_partition *p, unsigned m, unsigned rank,
                               const double *src, double *dst);
void amp_partition_rows_to_file(const amp_partition *p, unsigned m, unsigned rank,
                                const double *src, double *dst);

#ifdef __cplusplus
}
#endif
#endif
