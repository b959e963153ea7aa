/* The GPU MTTKRP's DRAM reads through a model of L2 (issue 28): what the
 * factor rows it gathers cost, and what keeping the streamed nonzeros out
 * of L2 (loads marked evict-first) would save, from the tensor alone.
 *
 * The kernel (run/cuda/mttkrp.cu, mttkrp_teams) splits a copy into T
 * teams of equal contiguous ranges that advance together; the model takes
 * one nonzero of every team in turn. Each nonzero reads its word and value
 * (16 bytes of the copy, f64) and, for every other mode, one factor row of
 * R doubles (whole 128-byte lines); a team writes an output row of M when
 * its row changes. L2 is one LRU of 128-byte lines of the given size (the
 * real one is set-associative, split in two halves, and not exactly LRU:
 * compare the model's first column with Nsight Compute before trusting its
 * second). Printed per mode: the DRAM bytes read with every line cached
 * alike, and with the copy's lines and M's writes kept out (evict-first);
 * the least any order could read (the copy once, every distinct row once).
 *
 *   l2-model FILE.amp [RANK (32)] [L2 MiB (50)] [TEAMS (16896)] [CHUNK (0)]
 *
 * 16896 teams: 132 SMs x 4 blocks x 256 threads / 8 lanes (rank 32, f64).
 * CHUNK 0: each team one contiguous range, as the kernel today; CHUNK c:
 * team q takes chunks q, q + TEAMS, q + 2 TEAMS, ... of c nonzeros, so
 * that the teams at work at any time share a window of TEAMS x c
 * consecutive nonzeros (a mapping the kernel could take: each chunk's
 * first and last rows then added atomically, as a range's are today).
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_core.h"

#define LINE 128

/* An LRU set of lines: a hash of line ids to slots (linear probing,
 * backward-shift deletion) and a doubly linked list of slots. */
typedef struct lru {
    uint64_t cap, used, mask;
    uint64_t *key;        /* per slot: its line */
    uint32_t *prev, *next, head, tail;
    uint64_t *hkey;       /* hash table: line + 1, 0 empty */
    uint32_t *hslot;
} lru;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static int lru_new(lru *c, uint64_t cap)
{
    memset(c, 0, sizeof *c);
    c->cap = cap;
    uint64_t h = 1;
    while (h < 2 * cap)
        h <<= 1;
    c->mask = h - 1;
    c->key = malloc(cap * sizeof *c->key);
    c->prev = malloc(cap * sizeof *c->prev);
    c->next = malloc(cap * sizeof *c->next);
    c->hkey = calloc(h, sizeof *c->hkey);
    c->hslot = malloc(h * sizeof *c->hslot);
    c->head = c->tail = UINT32_MAX;
    return c->key && c->prev && c->next && c->hkey && c->hslot ? 0 : -1;
}

static void lru_free(lru *c)
{
    free(c->key);
    free(c->prev);
    free(c->next);
    free(c->hkey);
    free(c->hslot);
}

static uint64_t find(const lru *c, uint64_t line)
{
    uint64_t i = mix(line) & c->mask;
    while (c->hkey[i] != 0 && c->hkey[i] != line + 1)
        i = (i + 1) & c->mask;
    return i;
}

static void hash_remove(lru *c, uint64_t i)
{
    c->hkey[i] = 0;
    for (uint64_t j = (i + 1) & c->mask; c->hkey[j] != 0; j = (j + 1) & c->mask) {
        uint64_t home = mix(c->hkey[j] - 1) & c->mask;
        /* j's entry may move to the hole at i if its home is not in (i, j]. */
        if (((j - home) & c->mask) >= ((j - i) & c->mask)) {
            c->hkey[i] = c->hkey[j];
            c->hslot[i] = c->hslot[j];
            c->hkey[j] = 0;
            i = j;
        }
    }
}

static void unlink_slot(lru *c, uint32_t s)
{
    if (c->prev[s] != UINT32_MAX)
        c->next[c->prev[s]] = c->next[s];
    else
        c->head = c->next[s];
    if (c->next[s] != UINT32_MAX)
        c->prev[c->next[s]] = c->prev[s];
    else
        c->tail = c->prev[s];
}

static void push_front(lru *c, uint32_t s)
{
    c->prev[s] = UINT32_MAX;
    c->next[s] = c->head;
    if (c->head != UINT32_MAX)
        c->prev[c->head] = s;
    c->head = s;
    if (c->tail == UINT32_MAX)
        c->tail = s;
}

/* 1 on a miss (the line then cached, the least recent one evicted). */
static int touch(lru *c, uint64_t line)
{
    uint64_t i = find(c, line);
    if (c->hkey[i] != 0) {
        uint32_t s = c->hslot[i];
        unlink_slot(c, s);
        push_front(c, s);
        return 0;
    }
    uint32_t s;
    if (c->used < c->cap) {
        s = (uint32_t)c->used++;
    } else {
        s = c->tail;
        unlink_slot(c, s);
        hash_remove(c, find(c, c->key[s]));
        i = find(c, line);
    }
    c->key[s] = line;
    c->hkey[i] = line + 1;
    c->hslot[i] = s;
    push_front(c, s);
    return 1;
}

/* Nonzero k's block key (the last block starting at or before k). */
static uint64_t key_of(const amp_copy *c, uint64_t k)
{
    size_t lo = 0, hi = c->nblocks > 0 ? c->nblocks - 1 : 0;
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if (c->block_start[mid] <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    return c->block_key[lo];
}

/* Line ids of distinct arrays never meet: the array in the top bits. */
static uint64_t line_of(unsigned array, uint64_t byte)
{
    return ((uint64_t)array << 56) | (byte / LINE);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: l2-model FILE.amp [RANK] [L2 MiB] [TEAMS]\n");
        return 2;
    }
    const unsigned R = argc > 2 ? (unsigned)atoi(argv[2]) : 32;
    const double mib = argc > 3 ? atof(argv[3]) : 50;
    const uint64_t T = argc > 4 ? strtoull(argv[4], NULL, 10) : 16896;
    const uint64_t C = argc > 5 ? strtoull(argv[5], NULL, 10) : 0;
    amp_error err = {0};
    amp_file *f = NULL;
    amp_tensor t;
    if (amp_file_open(argv[1], &f, &err) != AMP_OK ||
        amp_tensor_load(f, 0, NULL, NULL, &t, &err) != AMP_OK) {
        fprintf(stderr, "l2-model: %s\n", amp_error_message(&err));
        return 1;
    }
    const uint64_t row_bytes = (uint64_t)R * 8, vsize = amp_value_size(t.value_type);
    const uint64_t lines = (uint64_t)(mib * 1024 * 1024) / LINE;
    printf("%s: %llu nonzeros, rank %u, L2 %.0f MiB (%llu lines of %d bytes), %llu teams, %s "
           "%llu\n", argv[1], (unsigned long long)t.nnz, R, mib, (unsigned long long)lines, LINE,
           (unsigned long long)T, C ? "chunks of" : "contiguous ranges,", (unsigned long long)C);
    printf("| mode | gathers GB | DRAM read, all cached alike GB | evict-first copy and M GB | "
           "least GB |\n|---|---:|---:|---:|---:|\n");
    uint8_t *seen = NULL;
    for (unsigned d = 0; d < t.nmodes; d++) {
        const amp_copy *c = &t.copies[d];
        const uint64_t n = c->nnz, len = C ? (n + T * C - 1) / (T * C) * C : (n + T - 1) / T;
        uint64_t dram[2] = {0, 0}, least = n * (8 + vsize);
        for (unsigned m = 0; m < t.nmodes; m++) {
            if (m == d)
                continue;
            free(seen);
            seen = calloc(t.rows[m], 1);
            if (seen == NULL)
                return 1;
            for (uint64_t k = 0; k < n; k++) {
                uint64_t ix = amp_blco_field(key_of(c, k), c->words[k],
                                             c->layout.shift[m], c->layout.width[m]);
                least += seen[ix] ? 0 : row_bytes;
                seen[ix] = 1;
            }
        }
        for (int evict_first = 0; evict_first < 2; evict_first++) {
            lru cache;
            if (lru_new(&cache, lines) != 0)
                return 1;
            uint64_t *row = malloc(T * sizeof *row);
            for (uint64_t q = 0; q < T; q++)
                row[q] = UINT64_MAX;
            for (uint64_t i = 0; i < len; i++)
                for (uint64_t q = 0; q < T; q++) {
                    uint64_t k = C ? (i / C * T + q) * C + i % C : q * len + i;
                    if (k >= n || (!C && k >= (q + 1) * len))
                        continue;
                    uint64_t key = key_of(c, k), w = c->words[k];
                    /* The copy: a new line every LINE / 8 nonzeros. */
                    if (evict_first) {
                        dram[1] += (k * 8 % LINE == 0 || i == 0) ? LINE : 0;
                        dram[1] += (k * vsize % LINE == 0 || i == 0) ? LINE : 0;
                    } else {
                        dram[0] += touch(&cache, line_of(0, k * 8)) * LINE;
                        dram[0] += touch(&cache, line_of(1, k * vsize)) * LINE;
                    }
                    for (unsigned m = 0; m < t.nmodes; m++) {
                        if (m == d)
                            continue;
                        uint64_t ix = amp_blco_field(key, w, c->layout.shift[m],
                                                     c->layout.width[m]);
                        for (uint64_t o = 0; o < row_bytes; o += LINE)
                            dram[evict_first] +=
                                touch(&cache, line_of(2 + m, ix * row_bytes + o)) * LINE;
                    }
                    /* M's row written once a row: cached (write-allocate)
                     * unless evict-first; its DRAM write is not counted. */
                    uint64_t out = amp_blco_field(key, w, c->layout.shift[d], c->layout.width[d]);
                    if (out != row[q] && !evict_first)
                        for (uint64_t o = 0; o < row_bytes; o += LINE)
                            touch(&cache, line_of(10, out * row_bytes + o));
                    row[q] = out;
                }
            free(row);
            lru_free(&cache);
        }
        printf("| %u | %.2f | %.2f | %.2f | %.2f |\n", d + 1,
               (double)n * (t.nmodes - 1) * row_bytes / 1e9, dram[0] / 1e9, dram[1] / 1e9,
               least / 1e9);
        fflush(stdout);
    }
    free(seen);
    amp_tensor_free(&t);
    amp_file_close(f);
    return 0;
}
