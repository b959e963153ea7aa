/* Internals of the .amp format library: byte-level encoding of the fixed
 * structures and the checks shared by the writer and the reader. Only
 * format/ sources include this. */
#ifndef AMP_FORMAT_INTERNAL_H
#define AMP_FORMAT_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "amped_format.h"

/* Bulk arrays (words, values, relabellings) go to and from the file in host
 * byte order, so that a chunk decompresses straight into the buffer that
 * is copied to the GPU. That is little-endian, as the format says. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the .amp format library needs a little-endian host"
#endif

/* PNG's trick: a high-bit byte catches 7-bit channels, CR LF catches
 * newline conversion in either direction, ^Z stops a DOS "type", LF last. */
#define AMP_MAGIC AMP_FILE_MAGIC
#define AMP_DIR_MAGIC "AMPDIR\0\0"
#define AMP_TRAILER_MAGIC "AMPEND\r\n"
#define AMP_MAGIC_LEN AMP_FILE_MAGIC_LEN

/* Header field offsets (amped(5) has the table). */
enum {
    AMP_H_MAGIC = 0, AMP_H_MAJOR = 8, AMP_H_MINOR = 10, AMP_H_FLAGS = 12,
    AMP_H_FILE_SIZE = 16, AMP_H_DIR_OFFSET = 24, AMP_H_DIR_SIZE = 32,
    AMP_H_DIR_HASH = 40, AMP_H_RESERVED = 48, AMP_H_HASH = 56
};
enum { AMP_T_DIR_OFFSET = 0, AMP_T_DIR_SIZE = 8, AMP_T_DIR_HASH = 16, AMP_T_MAGIC = 24 };

/* Fixed parts of META and MODE. */
#define AMP_META_FIXED 40
#define AMP_MODE_FIXED 24
#define AMP_MODE_FIELD_SIZE 4
#define AMP_MODE_SHARD_SIZE 32
/* No META or MODE section this large is legitimate; refusing bigger ones
 * keeps a corrupt size from becoming a huge allocation. */
#define AMP_SMALL_SECTION_MAX (UINT64_C(64) << 20)
/* Shards per mode: far more than any GPU count, small enough to bound the
 * table. */
#define AMP_MAX_SHARDS (UINT32_C(1) << 20)

/* Explicit little-endian access, whatever the host (configure insists on a
 * little-endian host today, but the format must not depend on it). */
static inline void amp_put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static inline void amp_put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static inline void amp_put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint16_t amp_get16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t amp_get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static inline uint64_t amp_get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Fuzzing builds (make fuzz) accept any checksum, so that mutated files
 * get past the checksums to the parsers and checks behind them. */
static inline int amp_hash_matches(uint64_t stored, uint64_t computed)
{
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    (void)stored;
    (void)computed;
    return 1;
#else
    return stored == computed;
#endif
}

/* Fixed structures to and from bytes. */
void amp_encode_entry(unsigned char *p, const amp_section *s);
void amp_decode_entry(const unsigned char *p, amp_section *s);
void amp_encode_header(unsigned char *h, uint64_t file_size, uint64_t dir_offset,
                       uint64_t dir_size, uint64_t dir_hash);
void amp_encode_trailer(unsigned char *t, uint64_t dir_offset, uint64_t dir_size,
                        uint64_t dir_hash);

/* META: size, encode into a buffer of that size, decode (strings point
 * into p, which must outlive meta; they are not NUL-terminated there, so
 * decode copies them into text, 3 * (AMP_META_TEXT_MAX + 1) bytes). */
size_t amp_meta_size(const amp_meta *m);
void amp_encode_meta(unsigned char *p, const amp_meta *m);
amp_status amp_decode_meta(const char *path, const unsigned char *p, size_t n,
                           amp_meta *m, char *text, amp_error *err);
/* Consistency of metadata values alone. */
amp_status amp_check_meta(const char *path, const amp_meta *m, amp_error *err);

size_t amp_mode_size(unsigned nmodes, uint32_t nshards);
void amp_encode_mode(unsigned char *p, const amp_mode_layout *l);
/* Decodes into l; allocates l->shards (caller frees). */
amp_status amp_decode_mode(const char *path, const unsigned char *p, size_t n,
                           unsigned nmodes, amp_mode_layout *l, amp_error *err);
/* A layout against the metadata: field widths and overlap, shard ranges
 * covering the compacted dimension, nonzero totals. Fills what the file
 * does not store: index_bits, key_bits and each shard's first_nnz. */
amp_status amp_check_mode(const char *path, const amp_meta *m, amp_mode_layout *l,
                          amp_error *err);

/* Section s's name for a message, into the array buf: formatted only
 * where a message is made, since a file of millions of small chunks (BLCO
 * blocks of a few nonzeros) spent seconds naming every section it
 * checked or read. */
#define AMP_SECTION_NAME(s, buf) amp_section_name((s), (buf), sizeof(buf))

/* Every directory entry on its own: known type or optional, known flags,
 * stored bytes inside [AMP_HEADER_SIZE, data_end), no two overlapping,
 * sizes that agree with the flags. */
amp_status amp_check_entries(const char *path, const amp_section *secs, size_t n,
                             uint64_t data_end, amp_error *err);

/* The index of the one section of this type and mode, or n when absent;
 * AMP_ERR_CORRUPT when there are several. mode AMP_NO_INDEX for META. */
amp_status amp_find_unique(const char *path, const amp_section *secs, size_t n,
                           uint16_t type, uint32_t mode, size_t *index, amp_error *err);

/* The directory against the metadata and layouts: one RELABEL per mode of
 * the right size, every chunk of every shard exactly once with consistent
 * counts, sizes and keys. Fills each shard's first_chunk and, per mode,
 * chunk_index[first_chunk + seq] = section index (arrays the caller
 * allocates with as many entries as the mode has chunks). */
amp_status amp_check_directory(const char *path, const amp_section *secs, size_t n,
                               const amp_meta *m, amp_mode_layout *const *layouts,
                               uint32_t *const *chunk_index, uint32_t *const *remap_index,
                               amp_error *err);

/* The FIBER entries (format 1.1) against the metadata and layouts: at most
 * one a mode, optional, a middle mode other than the copy's, one count a
 * shard. fiber_at[d]: the entry's index, or n when mode d has none. */
amp_status amp_check_fibers(const char *path, const amp_section *secs, size_t n,
                            const amp_meta *m, amp_mode_layout *const *layouts, size_t *fiber_at,
                            amp_error *err);
/* A FIBER section's content: every shard's count within [rows, nnz]. */
amp_status amp_check_fiber_counts(const char *path, const amp_section *s,
                                  const amp_mode_layout *l, const uint64_t *counts,
                                  amp_error *err);

/* Chunks of a mode: the sum of its shards' nchunks. */
uint64_t amp_mode_nchunks(const amp_mode_layout *l);

int amp_section_type_known(uint16_t type);

/* Chunk words to and from byte planes (AMP_SECTION_PLANAR_WORDS): plane b
 * holds byte b of every word. amp_word_planes makes planes first .. first
 * + count - 1 of n words (or u32 values), one after the other (count n
 * bytes): the writer makes a chunk's planes a few at a time. */
void amp_word_planes(const uint64_t *words, size_t n, unsigned first, unsigned count,
                     unsigned char *planes);
void amp_u32_planes(const uint32_t *v, size_t n, unsigned first, unsigned count,
                    unsigned char *planes);
void amp_planes_to_words(const unsigned char *planes, size_t n, uint64_t *words);
/* The same for 4-byte values (f32). 8-byte values use the word functions. */
void amp_planes_to_u32(const unsigned char *planes, size_t n, uint32_t *v);

#endif
