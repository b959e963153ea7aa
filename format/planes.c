/* Byte planes for chunk words.
 *
 * Stored chunks keep their 64-bit words as eight planes (byte 0 of every
 * word, then byte 1, ...) before compression: the high bytes of sorted,
 * narrow linearized indices are nearly constant, and apart they compress to
 * almost nothing while the noisy low bytes stay cheap raw literals. On the
 * tensors in ../shared/data and cpu20m this was measured to make chunks
 * smaller and their decompression faster (bench/RESULTS.md). Values in
 * planes help most data too, but repeated floating-point values compress
 * better whole, so the writer tries both per chunk (writer.c).
 * Both directions are SSE2 (part of x86-64), with portable loops
 * elsewhere: the transform runs on every chunk written and the un-transform
 * on every chunk read. */
#include <config.h>

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "format_internal.h"

#ifdef __SSE2__
/* Eight 32-bit lanes holding values below 2^16 (two registers), packed to
 * eight 16-bit lanes: packs saturates signed, so the values are moved down
 * by 2^15 first and back up after. */
static inline __m128i pack_u16(__m128i a, __m128i b)
{
    const __m128i bias32 = _mm_set1_epi32(0x8000);
    const __m128i bias16 = _mm_set1_epi16((short)0x8000);
    return _mm_xor_si128(_mm_packs_epi32(_mm_sub_epi32(a, bias32), _mm_sub_epi32(b, bias32)),
                         bias16);
}

/* Bytes `first` and first + 1 of 8 words, as 16-bit lanes in word order. */
static inline __m128i word_pairs8(const uint64_t *w, __m128i shift)
{
    const __m128i mask = _mm_set_epi32(0, 0xFFFF, 0, 0xFFFF);
    __m128i r[4];
    for (int j = 0; j < 4; j++)
        r[j] = _mm_and_si128(_mm_srl_epi64(_mm_loadu_si128((const __m128i *)(w + 2 * j)), shift),
                             mask);
    /* Each 64-bit lane's value to the register's low two 32-bit lanes. */
    for (int j = 0; j < 4; j++)
        r[j] = _mm_shuffle_epi32(r[j], _MM_SHUFFLE(3, 1, 2, 0));
    return pack_u16(_mm_unpacklo_epi64(r[0], r[1]), _mm_unpacklo_epi64(r[2], r[3]));
}

/* Two planes from 16 lanes of byte pairs: low bytes, then high bytes. */
static inline void split_pairs16(__m128i a, __m128i b, unsigned char *lo, unsigned char *hi)
{
    const __m128i low = _mm_set1_epi16(0x00FF);
    _mm_storeu_si128((__m128i *)lo,
                     _mm_packus_epi16(_mm_and_si128(a, low), _mm_and_si128(b, low)));
    _mm_storeu_si128((__m128i *)hi, _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
}
#endif

/* The writer makes planes two at a time (count 2), on every chunk it
 * compresses: that case is SSE2, 16 words a step. */
void amp_word_planes(const uint64_t *words, size_t n, unsigned first, unsigned count,
                     unsigned char *planes)
{
    size_t i = 0;
#ifdef __SSE2__
    if (count == 2) {
        __m128i shift = _mm_cvtsi32_si128((int)(8 * first));
        for (; i + 16 <= n; i += 16)
            split_pairs16(word_pairs8(words + i, shift), word_pairs8(words + i + 8, shift),
                          planes + i, planes + n + i);
    }
#endif
    for (; i < n; i++) {
        uint64_t w = words[i] >> (8 * first);
        for (unsigned b = 0; b < count; b++)
            planes[b * n + i] = (unsigned char)(w >> (8 * b));
    }
}

void amp_u32_planes(const uint32_t *v, size_t n, unsigned first, unsigned count,
                    unsigned char *planes)
{
    size_t i = 0;
#ifdef __SSE2__
    if (count == 2) {
        __m128i shift = _mm_cvtsi32_si128((int)(8 * first));
        const __m128i mask = _mm_set1_epi32(0xFFFF);
        for (; i + 16 <= n; i += 16) {
            __m128i r[4];
            for (int j = 0; j < 4; j++)
                r[j] = _mm_and_si128(
                    _mm_srl_epi32(_mm_loadu_si128((const __m128i *)(v + i + 4 * j)), shift),
                    mask);
            split_pairs16(pack_u16(r[0], r[1]), pack_u16(r[2], r[3]), planes + i,
                          planes + n + i);
        }
    }
#endif
    for (; i < n; i++) {
        uint32_t w = v[i] >> (8 * first);
        for (unsigned b = 0; b < count; b++)
            planes[b * n + i] = (unsigned char)(w >> (8 * b));
    }
}

void amp_planes_to_words(const unsigned char *planes, size_t n, uint64_t *words)
{
    size_t i = 0;
#ifdef __SSE2__
    for (; i + 16 <= n; i += 16) {
        __m128i a[8];
        for (unsigned b = 0; b < 8; b++)
            a[b] = _mm_loadu_si128((const __m128i *)(planes + b * n + i));
        /* Pairs of planes interleaved: elements 0-7 in the lo halves. */
        __m128i p01l = _mm_unpacklo_epi8(a[0], a[1]), p01h = _mm_unpackhi_epi8(a[0], a[1]);
        __m128i p23l = _mm_unpacklo_epi8(a[2], a[3]), p23h = _mm_unpackhi_epi8(a[2], a[3]);
        __m128i p45l = _mm_unpacklo_epi8(a[4], a[5]), p45h = _mm_unpackhi_epi8(a[4], a[5]);
        __m128i p67l = _mm_unpacklo_epi8(a[6], a[7]), p67h = _mm_unpackhi_epi8(a[6], a[7]);
        /* Four bytes per element: planes 0-3 and 4-7 of 4 elements each. */
        __m128i q0 = _mm_unpacklo_epi16(p01l, p23l), q1 = _mm_unpackhi_epi16(p01l, p23l);
        __m128i q2 = _mm_unpacklo_epi16(p45l, p67l), q3 = _mm_unpackhi_epi16(p45l, p67l);
        __m128i q4 = _mm_unpacklo_epi16(p01h, p23h), q5 = _mm_unpackhi_epi16(p01h, p23h);
        __m128i q6 = _mm_unpacklo_epi16(p45h, p67h), q7 = _mm_unpackhi_epi16(p45h, p67h);
        /* Whole words, two per register, in element order. */
        __m128i *out = (__m128i *)(words + i);
        _mm_storeu_si128(out + 0, _mm_unpacklo_epi32(q0, q2));
        _mm_storeu_si128(out + 1, _mm_unpackhi_epi32(q0, q2));
        _mm_storeu_si128(out + 2, _mm_unpacklo_epi32(q1, q3));
        _mm_storeu_si128(out + 3, _mm_unpackhi_epi32(q1, q3));
        _mm_storeu_si128(out + 4, _mm_unpacklo_epi32(q4, q6));
        _mm_storeu_si128(out + 5, _mm_unpackhi_epi32(q4, q6));
        _mm_storeu_si128(out + 6, _mm_unpacklo_epi32(q5, q7));
        _mm_storeu_si128(out + 7, _mm_unpackhi_epi32(q5, q7));
    }
#endif
    for (; i < n; i++) {
        uint64_t w = 0;
        for (unsigned b = 0; b < 8; b++)
            w |= (uint64_t)planes[b * n + i] << (8 * b);
        words[i] = w;
    }
}

void amp_planes_to_u32(const unsigned char *planes, size_t n, uint32_t *v)
{
    size_t i = 0;
#ifdef __SSE2__
    for (; i + 16 <= n; i += 16) {
        __m128i a0 = _mm_loadu_si128((const __m128i *)(planes + i));
        __m128i a1 = _mm_loadu_si128((const __m128i *)(planes + n + i));
        __m128i a2 = _mm_loadu_si128((const __m128i *)(planes + 2 * n + i));
        __m128i a3 = _mm_loadu_si128((const __m128i *)(planes + 3 * n + i));
        __m128i p01l = _mm_unpacklo_epi8(a0, a1), p01h = _mm_unpackhi_epi8(a0, a1);
        __m128i p23l = _mm_unpacklo_epi8(a2, a3), p23h = _mm_unpackhi_epi8(a2, a3);
        __m128i *out = (__m128i *)(v + i);
        _mm_storeu_si128(out + 0, _mm_unpacklo_epi16(p01l, p23l));
        _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(p01l, p23l));
        _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(p01h, p23h));
        _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(p01h, p23h));
    }
#endif
    for (; i < n; i++) {
        uint32_t x = 0;
        for (unsigned b = 0; b < 4; b++)
            x |= (uint32_t)planes[b * n + i] << (8 * b);
        v[i] = x;
    }
}
