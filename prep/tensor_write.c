/* Writers for FROSTT text and binary, used by amped-prep's conversions and
 * the bench generator. Text is formatted in parallel into per-chunk
 * buffers written in order; values print with the fewest digits that read
 * back to the same double. */
#include <config.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "amp_outfile.h"
#include "tensor_internal.h"

#define TEXT_CHUNK_NNZ ((uint64_t)1 << 16)

static size_t format_u64(char *p, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

/* Shortest of %.15g..%.17g that round-trips: integers and short decimals
 * stay short, everything else stays exact. */
static size_t format_double(char *p, double v)
{
    if (v == 0 && signbit(v)) {
        memcpy(p, "-0", 2);
        return 2;
    }
    if (v > -1e15 && v < 1e15 && v == (double)(int64_t)v) {
        if (v < 0) {
            *p = '-';
            return 1 + format_u64(p + 1, (uint64_t)(-(int64_t)v));
        }
        return format_u64(p, (uint64_t)(int64_t)v);
    }
    for (int prec = 15; prec <= 17; prec++) {
        int n = snprintf(p, 32, "%.*g", prec, v);
        if (prec == 17 || strtod(p, NULL) == v)
            return (size_t)n;
    }
    return 0;
}

amp_status amp_write_tns_to(const amp_coo *t, amp_outfile *of, amp_error *err)
{
    amp_status rc = AMP_OK;
    const int threads = amp_max_threads();
    /* Each line: up to 19 digits and a space per mode, a value, a newline. */
    const size_t line_max = (size_t)t->nmodes * 21 + 40;
    const size_t chunk_bytes = (size_t)TEXT_CHUNK_NNZ * line_max;
    const uint64_t nchunks = (t->nnz + TEXT_CHUNK_NNZ - 1) / TEXT_CHUNK_NNZ;
    char **bufs = calloc((size_t)threads, sizeof *bufs);
    size_t *lens = calloc((size_t)threads, sizeof *lens);
    if (bufs == NULL || lens == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < threads; i++)
        if ((bufs[i] = amp_alloc(chunk_bytes, "text output", err)) == NULL)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
    /* Rounds of one chunk per thread: format in parallel, write in order. */
    for (uint64_t c0 = 0; c0 < nchunks; c0 += (uint64_t)threads) {
        #pragma omp parallel for schedule(static, 1) num_threads(threads)
        for (int i = 0; i < threads; i++) {
            uint64_t c = c0 + (uint64_t)i;
            lens[i] = 0;
            if (c >= nchunks)
                continue;
            uint64_t lo = c * TEXT_CHUNK_NNZ, hi = lo + TEXT_CHUNK_NNZ;
            if (hi > t->nnz)
                hi = t->nnz;
            char *p = bufs[i];
            for (uint64_t k = lo; k < hi; k++) {
                for (unsigned m = 0; m < t->nmodes; m++) {
                    p += format_u64(p, t->ind[m][k] + 1);
                    *p++ = ' ';
                }
                p += format_double(p, t->val[k]);
                *p++ = '\n';
            }
            lens[i] = (size_t)(p - bufs[i]);
        }
        for (int i = 0; i < threads; i++)
            AMP_CHECK_GOTO(amp_outfile_write(of, bufs[i], lens[i], err), rc, done);
    }
    rc = amp_outfile_finish(of, err);
done:
    if (rc != AMP_OK)
        amp_outfile_abort(of);
    if (bufs)
        for (int i = 0; i < threads; i++)
            amp_free(bufs[i]);
    free(bufs);
    free(lens);
    return rc;
}

static void put_le32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static void put_le64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

amp_status amp_write_bin_to(const amp_coo *t, amp_outfile *of, amp_error *err)
{
    amp_status rc = AMP_OK;
    /* 32-bit indices when every 1-based index fits: half the bytes. */
    int wide = 0;
    for (unsigned m = 0; m < t->nmodes; m++)
        wide |= t->dims[m] > UINT32_MAX;
    const unsigned iw = wide ? 8 : 4;
    unsigned char h[28 + AMP_MAX_MODES * 8];
    put_le32(h, 1);
    put_le32(h + 4, iw);
    put_le32(h + 8, 8);
    put_le64(h + 12, t->nmodes);
    put_le64(h + 20, t->nnz);
    size_t hn = 28;
    for (unsigned m = 0; m < t->nmodes; m++) {
        if (iw == 8)
            put_le64(h + hn, t->dims[m]);
        else
            put_le32(h + hn, (uint32_t)t->dims[m]);
        hn += iw;
    }
    const size_t chunk = (size_t)1 << 20;
    unsigned char *buf = amp_alloc(chunk * 8, "binary output", err);
    if (buf == NULL) {
        amp_outfile_abort(of);
        return AMP_ERR_NOMEM;
    }
    AMP_CHECK_GOTO(amp_outfile_write(of, h, hn, err), rc, done);
    /* The host is little-endian (configure checks), so doubles go as is. */
    AMP_CHECK_GOTO(amp_outfile_write(of, t->val, (size_t)t->nnz * 8, err), rc, done);
    for (unsigned m = 0; m < t->nmodes; m++) {
        const uint64_t *x = t->ind[m];
        for (uint64_t lo = 0; lo < t->nnz; lo += chunk) {
            size_t n = t->nnz - lo < chunk ? (size_t)(t->nnz - lo) : chunk;
            if (iw == 8) {
                uint64_t *o = (uint64_t *)(void *)buf;
                #pragma omp parallel for schedule(static) if (n > 65536)
                for (size_t i = 0; i < n; i++) o[i] = x[lo + i] + 1;
            } else {
                uint32_t *o = (uint32_t *)(void *)buf;
                #pragma omp parallel for schedule(static) if (n > 65536)
                for (size_t i = 0; i < n; i++) o[i] = (uint32_t)(x[lo + i] + 1);
            }
            AMP_CHECK_GOTO(amp_outfile_write(of, buf, n * iw, err), rc, done);
        }
    }
    rc = amp_outfile_finish(of, err);
done:
    if (rc != AMP_OK)
        amp_outfile_abort(of);
    amp_free(buf);
    return rc;
}

/* The one-file write: open, write, place. */
static amp_status write_path(const amp_coo *t, const char *path, int no_clobber,
                             amp_status (*to)(const amp_coo *, amp_outfile *, amp_error *),
                             amp_error *err)
{
    amp_outfile of, *list[1] = {&of};
    AMP_CHECK(amp_outfile_open(&of, path, err));
    of.no_clobber = no_clobber;
    amp_status rc = to(t, &of, err);
    if (rc == AMP_OK)
        rc = amp_outfile_place_all(list, 1, err);
    amp_outfile_abort(&of);
    return rc;
}

amp_status amp_write_tns(const amp_coo *t, const char *path, int no_clobber, amp_error *err)
{
    return write_path(t, path, no_clobber, amp_write_tns_to, err);
}

amp_status amp_write_bin(const amp_coo *t, const char *path, int no_clobber, amp_error *err)
{
    return write_path(t, path, no_clobber, amp_write_bin_to, err);
}
