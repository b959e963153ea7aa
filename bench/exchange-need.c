/* The factor rows a GPU of a run needs from the others, against the rows
 * it receives today (issues 26 and 28): counted on a prepared tensor, for
 * the owner-computes partition amped-run deals over P GPUs.
 *
 * After mode m's update every GPU sends the rows it owns to every other
 * (amp_comm_allgatherv): each GPU receives all rows[m] - own rows. The
 * MTTKRPs of the other modes on GPU g read only the rows of mode m that
 * g's nonzeros touch (its part's copies d != m), so an exchange of just
 * those rows (SPLATT's medium-grained exchange) would move fewer; how many
 * fewer, this counts. Per P: per mode, the rows a GPU receives today and
 * the rows it needs (mean over the GPUs), and the bytes an iteration both
 * ways at rank R in f64. bench/scale-model.py estimates the same from the
 * power law; this is the tensor's own count.
 *
 *   exchange-need FILE.amp [RANK (32)] [P ... (2 4 8)]
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_core.h"

static unsigned long long popcount_range(const uint64_t *bits, uint64_t begin, uint64_t end)
{
    unsigned long long n = 0;
    for (uint64_t i = begin; i < end; i++)
        n += (bits[i >> 6] >> (i & 63)) & 1;
    return n;
}

/* Marks in need[m] every row of mode m that a nonzero of part's copies
 * d != m touches (indices in the run's numbering). */
static void mark_needed(const amp_tensor *part, uint64_t *const *need)
{
    for (unsigned d = 0; d < part->nmodes; d++) {
        const amp_copy *c = &part->copies[d];
        const amp_mode_layout *l = &c->layout;
        for (size_t b = 0; b < c->nblocks; b++)
            for (uint64_t k = c->block_start[b]; k < c->block_start[b + 1]; k++)
                for (unsigned m = 0; m < part->nmodes; m++) {
                    if (m == d)
                        continue;
                    uint64_t i = amp_blco_field(c->block_key[b], c->words[k], l->shift[m],
                                                l->width[m]);
                    need[m][i >> 6] |= 1ull << (i & 63);
                }
    }
}

static int one_count(const amp_tensor *t, unsigned P, unsigned R, amp_error *err)
{
    const unsigned N = t->nmodes;
    amp_partition p;
    if (amp_partition_new(t, P, AMP_PARTITION_OWNER, &p, err) != AMP_OK)
        return 1;
    double today[AMP_MAX_MODES] = {0}, needed[AMP_MAX_MODES] = {0};
    uint64_t *need[AMP_MAX_MODES] = {0};
    int status = 0;
    for (unsigned m = 0; m < N && status == 0; m++) {
        need[m] = malloc(((t->rows[m] + 63) / 64) * sizeof *need[m]);
        status = need[m] == NULL;
    }
    for (unsigned g = 0; g < P && status == 0; g++) {
        amp_tensor part;
        if (amp_partition_tensor(t, &p, g, 0, &part, err) != AMP_OK) {
            status = 1;
            break;
        }
        for (unsigned m = 0; m < N; m++)
            memset(need[m], 0, ((t->rows[m] + 63) / 64) * sizeof *need[m]);
        mark_needed(&part, need);
        for (unsigned m = 0; m < N; m++) {
            const uint64_t b = p.modes[m].row_begin[g], e = b + p.modes[m].row_count[g];
            unsigned long long touched = popcount_range(need[m], 0, t->rows[m]);
            unsigned long long own = popcount_range(need[m], b, e);
            today[m] += (double)(t->rows[m] - p.modes[m].row_count[g]);
            needed[m] += (double)(touched - own);
        }
        amp_tensor_free(&part);
    }
    if (status == 0) {
        double bt = 0, bn = 0;
        printf("| %u |", P);
        for (unsigned m = 0; m < N; m++) {
            printf(" %.0f / %.0f (%.2f) |", today[m] / P, needed[m] / P,
                   today[m] > 0 ? needed[m] / today[m] : 0.0);
            bt += today[m];
            bn += needed[m];
        }
        const double row_bytes = (double)R * 8;
        printf(" %.2f / %.2f GB (%.2f) |\n", bt * row_bytes / 1e9, bn * row_bytes / 1e9,
               bt > 0 ? bn / bt : 0.0);
    } else if (err->status == AMP_OK) {
        AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    for (unsigned m = 0; m < N; m++)
        free(need[m]);
    amp_partition_free(&p);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: exchange-need FILE.amp [RANK] [P ...]\n");
        return 2;
    }
    const unsigned R = argc > 2 ? (unsigned)atoi(argv[2]) : 32;
    unsigned ps[16] = {2, 4, 8}, np = 3;
    if (argc > 3) {
        np = 0;
        for (int i = 3; i < argc && np < 16; i++) {
            int v = atoi(argv[i]);
            if (v < 2 || v > AMP_MAX_GPUS) {
                fprintf(stderr, "exchange-need: %s GPUs: 2 to %d\n", argv[i], AMP_MAX_GPUS);
                return 2;
            }
            ps[np++] = (unsigned)v;
        }
    }
    if (R < 1) {
        fprintf(stderr, "exchange-need: rank %s: at least 1\n", argv[2]);
        return 2;
    }
    amp_error err = {0};
    amp_file *f = NULL;
    amp_tensor t;
    if (amp_file_open(argv[1], &f, &err) != AMP_OK ||
        amp_tensor_load(f, 0, NULL, NULL, &t, &err) != AMP_OK) {
        fprintf(stderr, "exchange-need: %s\n", amp_error_message(&err));
        return 1;
    }
    printf("%s: %llu nonzeros, rank %u. Per mode, a GPU's rows received today / needed "
           "(ratio, mean over the GPUs); all GPUs' bytes an iteration today / needed.\n\n",
           argv[1], (unsigned long long)t.nnz, R);
    printf("| GPUs |");
    for (unsigned m = 0; m < t.nmodes; m++)
        printf(" mode %u (%llu rows) |", m + 1, (unsigned long long)t.rows[m]);
    printf(" bytes |\n|---:|");
    for (unsigned m = 0; m <= t.nmodes; m++)
        printf("---:|");
    printf("\n");
    int status = 0;
    for (unsigned i = 0; i < np && status == 0; i++)
        if (one_count(&t, ps[i], R, &err) != 0) {
            fprintf(stderr, "exchange-need: %u GPUs: %s\n", ps[i], amp_error_message(&err));
            status = 1;
        }
    amp_tensor_free(&t);
    amp_file_close(f);
    return status;
}
