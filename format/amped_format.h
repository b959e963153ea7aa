/* The .amp shard file: amped-prep writes it, amped-run reads it.
 *
 * This is the format library's only public header. The byte layout is
 * specified in amped(5) (man/amped.5); this header is the C view of it.
 *
 * A file holds one tensor prepared for CP decomposition: per mode, one copy
 * of the nonzeros ordered by that mode's (relabelled) index, cut into
 * shards that own disjoint ranges of output rows, each shard cut into
 * chunks that are independently Zstandard-compressed and checksummed with
 * XXH3-64. A directory at the end lists every section, so any
 * (mode, shard, chunk) can be read without touching the rest.
 *
 * Writing: amp_writer_open, then META first, then MODE, RELABEL and CHUNK
 * sections in any order (each written as it is produced), then
 * amp_writer_commit, which writes the directory, flushes and renames the
 * temporary file into place. Reading: amp_file_open validates everything
 * but the bulk data; amp_section_read reads one section, verifies its
 * checksum and decompresses it into a buffer the caller owns. Any number of
 * threads may read one open file at once, each with its own
 * amp_section_reader. Nothing here prints or exits. */
#ifndef AMPED_FORMAT_H
#define AMPED_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "amp_error.h"
#include "amp_limits.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version policy: a reader reads every file of its own major version. Minor
 * versions only add optional sections (flag AMP_SECTION_OPTIONAL), which
 * older readers skip; anything else is a new major version, refused with a
 * message naming the versions this build reads. */
#define AMP_FORMAT_MAJOR 1
#define AMP_FORMAT_MINOR 1

/* The first bytes of every .amp file, for tools that tell it from others. */
#define AMP_FILE_MAGIC "\x89" "AMP\r\n\x1a\n"
#define AMP_FILE_MAGIC_LEN 8
#define AMP_HEADER_SIZE 64
#define AMP_TRAILER_SIZE 32
#define AMP_DIR_HEADER_SIZE 24
#define AMP_DIR_ENTRY_SIZE 64

typedef enum amp_section_type {
    AMP_SECTION_META = 1,     /* tensor metadata; exactly one */
    AMP_SECTION_MODE = 2,     /* one mode copy's layout and shard table */
    AMP_SECTION_RELABEL = 3,  /* one mode's new index -> original index */
    AMP_SECTION_CHUNK = 4,    /* a run of one shard's nonzeros */
    AMP_SECTION_REMAP = 5,    /* optional: per nonzero of a chunk, its position in the
                               * next mode's copy (FLYCOO remap IDs) */
    AMP_SECTION_FIBER = 6     /* optional (format 1.1): a mode copy's fiber level, its
                               * middle mode and each shard's fiber count */
} amp_section_type;

#define AMP_SECTION_ZSTD 0x1u      /* the stored bytes are Zstandard frames (one, from amped) */
#define AMP_SECTION_OPTIONAL 0x2u  /* a reader that does not know the type skips it */
/* A compressed CHUNK whose words were stored as 8 byte planes (byte 0 of
 * every word, then byte 1, ...) before compression; readers undo it, so
 * the raw form is always words then values. */
#define AMP_SECTION_PLANAR_WORDS 0x4u
/* Likewise for the values: 4 or 8 byte planes after the words. */
#define AMP_SECTION_PLANAR_VALUES 0x8u
#define AMP_NO_INDEX UINT32_MAX    /* mode or shard of a section that has none */

/* One directory entry. count and aux mean, per type: CHUNK: nonzeros and
 * the BLCO block key; RELABEL: entries; REMAP: entries and their bytes;
 * FIBER: shards and the middle mode (0-based); others: 0. */
typedef struct amp_section {
    uint16_t type;
    uint16_t flags;
    uint32_t mode;
    uint32_t shard;
    uint32_t seq;            /* chunk number within its shard */
    uint64_t offset;         /* of the stored bytes, from the start of the file */
    uint64_t stored_size;    /* bytes in the file */
    uint64_t raw_size;       /* bytes once decompressed */
    uint64_t hash;           /* XXH3-64 (seed 0) of the stored bytes */
    uint64_t count;
    uint64_t aux;
} amp_section;

typedef enum amp_value_type {
    AMP_VALUES_F32 = 1,
    AMP_VALUES_F64 = 2
} amp_value_type;

/* The longest string META may hold (source name, writer, parameters). */
#define AMP_META_TEXT_MAX 4096

typedef struct amp_meta {
    unsigned nmodes;                        /* 1 .. AMP_MAX_MODES */
    amp_value_type value_type;
    uint64_t nnz;
    uint64_t dims[AMP_MAX_MODES];           /* as the source declared or implied them */
    uint64_t compact_dims[AMP_MAX_MODES];   /* nonempty slices: the relabelled index range */
    double norm_sq;                         /* |X|^2: repeated coordinates summed */
    uint64_t source_size;                   /* bytes of the source file on disk */
    uint64_t source_hash;                   /* XXH3-64 of those bytes; 0: unknown */
    const char *source_name;                /* UTF-8, no NUL; "" when unknown */
    const char *writer;                     /* e.g. "amped-prep 0.1.0" */
    const char *params;                     /* "key=value" lines, one per parameter */
} amp_meta;

/* Chunk encodings. BLCO64: each nonzero's relabelled indices packed into
 * one linearized index L = sum over modes m of index_m << shift[m], of
 * index_bits bits. Its low 64 bits are stored per nonzero ("word"); bits
 * 64 and up form the block key, which is the same for every nonzero of a
 * chunk and stored once, in the directory entry. */
#define AMP_ENCODING_BLCO64 1u
#define AMP_MAX_INDEX_BITS 128u
/* Upper bound on nonzeros in one chunk, so a chunk's raw size (and the
 * memory a reader commits to it) is bounded: 2^28 * 16 bytes = 4 GiB. */
#define AMP_CHUNK_NNZ_MAX (UINT64_C(1) << 28)

typedef struct amp_shard {
    uint64_t index_begin;    /* output rows [index_begin, index_end), relabelled */
    uint64_t index_end;
    uint64_t nnz;
    uint32_t nchunks;
    /* Derived on read, not stored: */
    uint64_t first_nnz;      /* position of the shard's first nonzero in the copy */
    uint32_t first_chunk;    /* position of its chunk 0 among the mode's chunks */
} amp_shard;

typedef struct amp_mode_layout {
    unsigned mode;           /* the output mode of this copy */
    unsigned nmodes;
    uint32_t encoding;       /* AMP_ENCODING_BLCO64 */
    uint8_t shift[AMP_MAX_MODES];
    uint8_t width[AMP_MAX_MODES];
    unsigned index_bits;     /* bits of L: the highest shift + width */
    unsigned key_bits;       /* index_bits - 64 when positive, else 0 */
    uint64_t chunk_nnz;      /* the most nonzeros in one chunk */
    uint32_t nshards;
    amp_shard *shards;       /* nshards entries */
} amp_mode_layout;

/* Inter-shard partitions are cut at run time, for the SM count the GPU
 * reports: ISP q of nparts covers positions [*begin, *end) of a shard of
 * nnz nonzeros (positions count from the shard's first nonzero). Sizes
 * differ by at most one and the ISPs tile the shard in order. */
static inline void amp_isp_range(uint64_t nnz, uint32_t nparts, uint32_t q, uint64_t *begin,
                                 uint64_t *end)
{
    uint64_t base = nnz / nparts, extra = nnz % nparts;
    *begin = base * q + (q < extra ? q : extra);
    *end = *begin + base + (q < extra);
}

/* The bit layout amped-prep uses for mode copy `mode`: each field as narrow
 * as compact_dims allows, the output mode in the top bits (so sorting by
 * output row sorts the keys), the other modes below it, the last mode
 * lowest. Fails (AMP_ERR_UNSUPPORTED) beyond AMP_MAX_INDEX_BITS. Shards
 * are left for the caller. */
amp_status amp_blco_layout(amp_mode_layout *layout, unsigned nmodes,
                           const uint64_t *compact_dims, unsigned mode, amp_error *err);

/* Host and device (nvcc) alike: the GPU kernels decode with this too. */
#ifdef __CUDACC__
#define AMP_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#else
#define AMP_HOST_DEVICE_INLINE inline
#endif

/* One index from a linearized index: decode is shift and mask (the
 * field of width bits at bit shift of key:word, the block key above the
 * 64-bit word). */
static AMP_HOST_DEVICE_INLINE uint64_t amp_blco_field(uint64_t key, uint64_t word,
                                                      unsigned shift, unsigned width)
{
    if (width == 0)
        return 0;
    uint64_t mask = width >= 64 ? UINT64_MAX : (UINT64_C(1) << width) - 1;
    if (shift >= 64)
        return (key >> (shift - 64)) & mask;
    uint64_t v = word >> shift;
    if (shift > 0 && shift + width > 64)
        v |= key << (64 - shift);
    return v & mask;
}

/* The inverse of amp_blco_field: index v (below 2^width) or'ed into the
 * field at bit shift of key:word. Re-encoding a nonzero for another
 * copy's layout is amp_blco_field per mode, then this; the GPU's remap
 * writes do the same. */
static AMP_HOST_DEVICE_INLINE void amp_blco_put(uint64_t v, unsigned shift, unsigned width,
                                                uint64_t *key, uint64_t *word)
{
    if (width == 0)
        return;
    if (shift >= 64) {
        *key |= v << (shift - 64);
        return;
    }
    *word |= v << shift;
    if (shift + width > 64)
        *key |= v >> (64 - shift);
}

/* Bytes one nonzero takes in a chunk's raw form: the word and the value. */
static inline size_t amp_value_size(amp_value_type t)
{
    return t == AMP_VALUES_F32 ? 4 : 8;
}

/* ---- writing ------------------------------------------------------------- */

typedef struct amp_writer amp_writer;

typedef struct amp_write_opts {
    int level;          /* Zstandard level, -7..22; 0 stores sections uncompressed;
                         * up to 1, literals are left raw, which decompresses
                         * faster (bench/RESULTS.md) */
    int threads;        /* compression threads; 0: the OpenMP default */
    int no_sync;        /* commit without fsync: faster, not crash-safe */
    int no_clobber;     /* commit fails if the file exists by then */
    /* Optional, NULL for none: the output already opened by the caller
     * (amp_outfile_open, before its input was read); amp_writer_open's
     * path is then unused, no_sync and no_clobber are the outfile's own,
     * commit only finishes it (the caller places it with its other
     * outputs: amp_outfile_place_all) and the caller aborts it on any
     * failure. */
    struct amp_outfile *out;
    /* Compressed bytes that may wait for the disk (held in memory) before
     * a thread waits instead of starting another chunk; 0: threads x the
     * largest raw chunk + 64 MiB. Chunks being compressed are not counted,
     * so up to one more compressed chunk per thread can be held. The next
     * chunk in file order never waits, so any value works, 1 included. */
    uint64_t queue_bytes;
    /* Optional, NULL for none: called by amp_writer_chunks once per chunk,
     * in file order, when the chunk takes its place in the file, with its
     * nonzeros. It runs on whichever writer thread holds that chunk, but
     * never on two at once, so it needs no lock; it must not call the
     * writer. */
    void (*progress)(void *ctx, uint64_t chunk_nnz);
    void *progress_ctx;
} amp_write_opts;

#define AMP_DEFAULT_LEVEL 1

void amp_write_opts_init(amp_write_opts *opts);

/* Create path's temporary sibling and start the file. */
amp_status amp_writer_open(amp_writer **w, const char *path, const amp_write_opts *opts,
                           amp_error *err);

/* The first section; the strings are copied. */
amp_status amp_writer_meta(amp_writer *w, const amp_meta *meta, amp_error *err);

/* A mode copy's layout and shard table (first_nnz and first_chunk are
 * ignored). */
amp_status amp_writer_mode(amp_writer *w, const amp_mode_layout *layout, amp_error *err);

/* new_to_orig[k]: the original 0-based index of relabelled index k, for
 * k < compact_dims[mode]. */
amp_status amp_writer_relabel(amp_writer *w, unsigned mode, const uint64_t *new_to_orig,
                              amp_error *err);

/* A relabel section compressed and hashed ahead of its place in the file,
 * on any thread, then placed by amp_writer_put among the other calls: the
 * bytes amp_writer_relabel would write there. A pack may start once
 * amp_writer_meta has returned (on another thread: started after it, or
 * synchronized with it) and may run beside any call on w except
 * amp_writer_commit and amp_writer_abort, which free w: every pack must
 * have returned before them. new_to_orig must not change during the call;
 * it is copied, so it need not outlive it. */
typedef struct amp_packed amp_packed;
amp_status amp_writer_pack_relabel(const amp_writer *w, unsigned mode,
                                   const uint64_t *new_to_orig, amp_packed **packed,
                                   amp_error *err);
/* Places a section packed for w and frees it, whatever the outcome; NULL
 * or a section packed for another writer is refused (and freed). */
amp_status amp_writer_put(amp_writer *w, amp_packed *packed, amp_error *err);
/* Frees a packed section that will not be placed; NULL is allowed. */
void amp_packed_free(amp_packed *packed);

/* Chunks are found through a callback so that they are compressed and
 * hashed in parallel on the writer's threads and written in the order
 * given. Stored uncompressed, a chunk is its count little-endian u64
 * words, then its count values (f32 or f64 per META). */
typedef struct amp_chunk_job {
    uint32_t mode;
    uint32_t shard;
    uint32_t seq;
    uint64_t count;     /* nonzeros, 1 .. the mode's chunk_nnz */
    uint64_t key;       /* BLCO block key */
} amp_chunk_job;

/* view sets *words to the job's count words and *vals to its count values
 * (in the file's value type), which the writer reads in place from
 * several threads while the call lasts, without copying them first. */
typedef amp_status (*amp_chunk_view_fn)(void *ctx, size_t job, const uint64_t **words,
                                        const void **vals, amp_error *err);

amp_status amp_writer_chunks(amp_writer *w, const amp_chunk_job *jobs, size_t njobs,
                             amp_chunk_view_fn view, void *ctx, amp_error *err);

/* The FIBER section of mode copy `mode` (after its MODE section): its
 * middle mode and counts[s], the fibers of shard s (see amp_file_fiber). */
amp_status amp_writer_fibers(amp_writer *w, unsigned mode, unsigned middle,
                             const uint64_t *counts, amp_error *err);

/* Any section, e.g. an optional one of a later minor version; compressed
 * when flags has AMP_SECTION_ZSTD and compression gains. */
amp_status amp_writer_section(amp_writer *w, const amp_section *desc, const void *raw,
                              size_t raw_size, amp_error *err);

/* Write the directory and trailer, check the whole file is one a reader
 * accepts, flush and rename into place; *file_size (if not NULL) gets the
 * final size. Frees w whatever the outcome. */
amp_status amp_writer_commit(amp_writer *w, uint64_t *file_size, amp_error *err);

/* Give up: remove the temporary file and free w. NULL is fine. */
void amp_writer_abort(amp_writer *w);

/* ---- reading ------------------------------------------------------------- */

typedef struct amp_file amp_file;

typedef struct amp_file_info {
    unsigned major, minor;
    uint32_t flags;
    uint64_t file_size;
    uint64_t dir_offset;
    uint64_t dir_size;
    size_t nsections;
    size_t nskipped;         /* optional sections of unknown type */
} amp_file_info;

/* Open and validate: magic, version, header, trailer and directory
 * checksums, and the META and MODE sections and their consistency with the
 * directory. Bulk sections (RELABEL, CHUNK) are checked when read. */
amp_status amp_file_open(const char *path, amp_file **f, amp_error *err);
void amp_file_close(amp_file *f);

const char *amp_file_path(const amp_file *f);
const amp_file_info *amp_file_info_get(const amp_file *f);
const amp_meta *amp_file_meta(const amp_file *f);
const amp_mode_layout *amp_file_mode(const amp_file *f, unsigned mode);
const amp_section *amp_file_section(const amp_file *f, size_t i);
const amp_section *amp_file_relabel(const amp_file *f, unsigned mode);
/* NULL when out of range. */
const amp_section *amp_file_chunk(const amp_file *f, unsigned mode, uint32_t shard,
                                  uint32_t seq);
/* The remap stream of that chunk: for each of its nonzeros, the position
 * (0-based, over the whole copy) of the same nonzero in the copy of mode
 * (mode + 1) % nmodes, as count entries of aux (4 or 8) bytes. It lets a
 * consumer hold one copy and reorder it into the next on the device.
 * NULL when the file has none (amped-prep --remap-streams writes them). */
const amp_section *amp_file_remap(const amp_file *f, unsigned mode, uint32_t shard,
                                  uint32_t seq);

/* Fibers (format 1.1). A fiber of mode copy d with middle mode m is a
 * maximal run of consecutive nonzeros of one shard that share their
 * output row (index d) and their index m; amped-prep orders each row by
 * its middle mode, so a fiber holds every nonzero of the row with that
 * index. The fibers live in the order of the words: nothing is stored per
 * nonzero. The FIBER section of mode d (optional; files of format 1.0 have
 * none) names m and each shard's fiber count, so that a consumer can size
 * per-fiber work without a pass and check the order it relies on.
 * amp_file_fiber: its directory entry, or NULL. amp_file_read_fibers: m
 * and the counts (nshards entries), each checked to lie between the
 * shard's rows and its nonzeros; AMP_ERR_CORRUPT naming the section
 * otherwise. A count that disagrees with the words is found only by
 * counting them (amp_tensor_load does). */
const amp_section *amp_file_fiber(const amp_file *f, unsigned mode);
amp_status amp_file_read_fibers(const amp_file *f, unsigned mode, unsigned *middle,
                                uint64_t *counts, amp_error *err);

/* "mode 2 shard 5 chunk 3", "directory", ... for messages. */
const char *amp_section_name(const amp_section *s, char *buf, size_t n);

/* Per-thread reading state: a decompression context and a buffer. */
typedef struct amp_section_reader amp_section_reader;

amp_status amp_section_reader_new(const amp_file *f, amp_section_reader **r,
                                  amp_error *err);
void amp_section_reader_free(amp_section_reader *r);

/* Read s, verify its checksum and decompress it into dst (dst_size at
 * least s->raw_size). Safe to call from many threads on one file with
 * one reader each. */
amp_status amp_section_read(amp_section_reader *r, const amp_section *s, void *dst,
                            size_t dst_size, amp_error *err);

/* Like amp_section_read, but a chunk stored in byte planes is left in
 * planes (see AMP_SECTION_PLANAR_WORDS and _VALUES in s->flags): for a
 * consumer that rebuilds words and values where it is cheaper, such as a
 * GPU kernel reading straight from planes, it saves the CPU a pass over
 * every byte. */
amp_status amp_section_read_planes(amp_section_reader *r, const amp_section *s, void *dst,
                                   size_t dst_size, amp_error *err);

/* amp_section_read in two halves, for a consumer that keeps sections
 * compressed in memory and decodes them again and again (amped-run
 * streaming from compressed chunks). amp_section_read_stored reads s's
 * stored bytes and verifies their checksum: *stored points into the
 * reader, valid until its next call. amp_section_decode turns stored
 * bytes that were verified so into the raw form in dst (dst_size at least
 * s->raw_size), as amp_section_read does; the reader's buffer is not
 * touched, so stored may point into it. */
amp_status amp_section_read_stored(amp_section_reader *r, const amp_section *s,
                                   const void **stored, amp_error *err);
amp_status amp_section_decode(amp_section_reader *r, const amp_section *s, const void *stored,
                              void *dst, size_t dst_size, amp_error *err);

/* Check a chunk's decoded content: every index within its mode's range,
 * the output index within the shard's rows and ascending. The checks a
 * consumer needs before it trusts the indices enough to address memory. */
amp_status amp_chunk_check(const amp_file *f, const amp_section *s, const void *raw,
                           amp_error *err);

/* Read a whole RELABEL section (compact_dims[mode] entries) and check it is
 * one-to-one into the original dimension. */
amp_status amp_file_read_relabel(const amp_file *f, unsigned mode, uint64_t *new_to_orig,
                                 amp_error *err);

/* Read and check every section on `threads` threads (0: OpenMP default),
 * calling report (if not NULL, serialized) for each one that fails. Returns
 * AMP_OK only if all hold; *nbad gets how many did not. */
typedef void (*amp_verify_report_fn)(void *ctx, const amp_section *s, const amp_error *e);
amp_status amp_file_verify(const amp_file *f, int threads, amp_verify_report_fn report,
                           void *ctx, size_t *nbad, amp_error *err);

#ifdef __cplusplus
}
#endif
#endif
