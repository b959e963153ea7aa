/* Reader for FROSTT binary v1 (.bin).
 *
 * Layout, all little-endian: u32 version (1), u32 index width in bytes
 * (4 or 8), u32 value width in bytes (4 or 8), u64 modes, u64 nonzeros,
 * the dimensions (one index width each), the values, then one index array
 * per mode; indices are 1-based. Arrays are read straight into the tensor
 * (64-bit fields) or through a small buffer (32-bit fields, widened), then
 * validated in parallel; an error names the byte offset of the bad field. */
#include <config.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_alloc.h"
#include "tensor_internal.h"

#define BIN_HEADER_BYTES 28
#define WIDEN_CHUNK ((size_t)1 << 22)   /* elements per 32-bit read */

static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t le64(const unsigned char *b)
{
    return (uint64_t)le32(b) | (uint64_t)le32(b + 4) << 32;
}

/* Read count elements of width w (4 or 8) into dst as 64-bit words; for
 * float values (is_float) 4-byte fields are floats widened to double. */
static amp_status read_array(amp_source *s, uint64_t *dst, uint64_t count, unsigned w,
                             int is_float, const char *what, amp_error *err)
{
    if (w == 8) {
        size_t bytes;
        AMP_CHECK(amp_mul_size((size_t)count, 8, &bytes, err));
        return amp_source_read_exact_parallel(s, dst, bytes, what, err);
    }
    uint32_t *tmp = amp_alloc(WIDEN_CHUNK * 4, "a read buffer", err);
    if (tmp == NULL)
        return AMP_ERR_NOMEM;
    amp_status rc = AMP_OK;
    for (uint64_t done = 0; done < count;) {
        size_t n = count - done < WIDEN_CHUNK ? (size_t)(count - done) : WIDEN_CHUNK;
        AMP_CHECK_GOTO(amp_source_read_exact(s, tmp, n * 4, what, err), rc, done_);
        uint64_t *out = dst + done;
        if (is_float) {
            double *o = (double *)out;
            #pragma omp parallel for schedule(static) if (n > 65536)
            for (size_t i = 0; i < n; i++) {
                float f;
                memcpy(&f, &tmp[i], 4);
                o[i] = f;
            }
        } else {
            #pragma omp parallel for schedule(static) if (n > 65536)
            for (size_t i = 0; i < n; i++)
                out[i] = tmp[i];
        }
        done += n;
    }
done_:
    amp_free(tmp);
    return rc;
}

amp_status amp_read_bin(amp_source *s, const amp_read_opts *opts, amp_coo *t,
                        amp_read_info *info, amp_error *err)
{
    unsigned char h[BIN_HEADER_BYTES];
    AMP_CHECK(amp_source_read_exact(s, h, sizeof h, "the header", err));
    uint32_t version = le32(h), iw = le32(h + 4), vw = le32(h + 8);
    uint64_t nmodes = le64(h + 12), nnz = le64(h + 20);
    if (version != 1)
        return AMP_FAIL(err, AMP_ERR_VERSION,
                        "%s: byte 0: FROSTT binary version %" PRIu32 "; amped reads version 1",
                        s->name, version);
    if (iw != 4 && iw != 8)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: byte 4: index width %" PRIu32
                        " byte%s; expected 4 or 8", s->name, iw, amp_plural(iw));
    if (vw != 4 && vw != 8)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: byte 8: value width %" PRIu32
                        " byte%s; expected 4 or 8", s->name, vw, amp_plural(vw));
    if (nmodes < 2 || nmodes > AMP_MAX_MODES)
        return AMP_FAIL(err, nmodes > AMP_MAX_MODES && nmodes < 1000 ? AMP_ERR_UNSUPPORTED
                                                                       : AMP_ERR_CORRUPT,
                        "%s: byte 12: %" PRIu64 " modes; amped reads 2 to %d", s->name, nmodes,
                        AMP_MAX_MODES);
    if (nnz == 0)
        return AMP_FAIL(err, AMP_ERR_EMPTY, "%s: byte 20: the header says 0 nonzeros", s->name);
    if (opts->ndims && opts->ndims != nmodes)
        return AMP_FAIL(err, AMP_ERR_USAGE, "%s: the data has %" PRIu64 " modes but %u "
                        "dimensions were given", s->name, nmodes, opts->ndims);
    /* The sizes must agree with the file before anything is allocated, so
     * a corrupt count cannot ask for terabytes. */
    uint64_t per_nnz = vw + nmodes * iw;
    uint64_t dims_off = BIN_HEADER_BYTES, vals_off = dims_off + nmodes * iw;
    if (nnz > (UINT64_MAX - vals_off) / per_nnz)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: byte 20: nonzero count %" PRIu64
                        " is impossibly large", s->name, nnz);
    uint64_t expect = vals_off + nnz * per_nnz;
    if (s->file_size && s->compression == AMP_COMPRESSION_NONE && s->file_size != expect)
        return AMP_FAIL(err, AMP_ERR_CORRUPT,
                        "%s: the header (%" PRIu64 " modes, %" PRIu64 " nonzeros, %" PRIu32
                        "-byte indices, %" PRIu32 "-byte values) needs %" PRIu64
                        " bytes but the file has %" PRIu64 " (%s)",
                        s->name, nmodes, nnz, iw, vw, expect, s->file_size,
                        s->file_size < expect ? "truncated" : "trailing bytes");

    unsigned char db[AMP_MAX_MODES * 8];
    AMP_CHECK(amp_source_read_exact(s, db, nmodes * iw, "the dimensions", err));
    uint64_t dims[AMP_MAX_MODES];
    for (unsigned m = 0; m < nmodes; m++) {
        dims[m] = iw == 8 ? le64(db + 8 * m) : le32(db + 4 * m);
        if (dims[m] == 0 || dims[m] > AMP_MAX_INDEX)
            return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: byte %" PRIu64 ": dimension %" PRIu64
                            " of mode %u is out of range", s->name, dims_off + m * iw, dims[m],
                            m + 1);
        if (opts->ndims)
            dims[m] = opts->dims[m];
    }

    amp_status rc = AMP_OK;
    AMP_CHECK_GOTO(amp_coo_init(t, (unsigned)nmodes, err), rc, fail);
    AMP_CHECK_GOTO(amp_coo_reserve(t, nnz, err), rc, fail);
    memcpy(t->dims, dims, sizeof(uint64_t) * nmodes);

    AMP_CHECK_GOTO(read_array(s, (uint64_t *)t->val, nnz, vw, 1, "the values", err), rc, fail);
    uint64_t bad = UINT64_MAX;
    const double *val = t->val;
    #pragma omp parallel for schedule(static) reduction(min : bad)
    for (uint64_t k = 0; k < nnz; k++)
        if (!isfinite(val[k]) && k < bad)
            bad = k;
    if (bad != UINT64_MAX)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_PARSE,
                       "%s: byte %" PRIu64 ": value of nonzero %" PRIu64 " is not finite (%g)",
                       s->name, vals_off + bad * vw, bad + 1, val[bad]);

    const uint64_t base = opts->index_base == 0 ? 0 : 1;
    for (unsigned m = 0; m < nmodes; m++) {
        char what[48];
        snprintf(what, sizeof what, "the indices of mode %u", m + 1);
        uint64_t off = vals_off + nnz * vw + (uint64_t)m * nnz * iw;
        AMP_CHECK_GOTO(read_array(s, t->ind[m], nnz, iw, 0, what, err), rc, fail);
        uint64_t *x = t->ind[m];
        const uint64_t dim = dims[m];
        bad = UINT64_MAX;
        #pragma omp parallel for schedule(static) reduction(min : bad)
        for (uint64_t k = 0; k < nnz; k++) {
            uint64_t v = x[k] - base;     /* wraps below base: caught as too large */
            if (v >= dim && k < bad)
                bad = k;
            x[k] = v;
        }
        if (bad != UINT64_MAX) {
            uint64_t raw = x[bad] + base;
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_RANGE,
                           "%s: byte %" PRIu64 ": index %" PRIu64 " of nonzero %" PRIu64
                           " in mode %u is outside %" PRIu64 "..%" PRIu64 "%s",
                           s->name, off + bad * iw, raw, bad + 1, m + 1, base,
                           dims[m] - 1 + base, base == 0 ? " (read as 0-based)" : "");
        }
    }
    if (!(s->file_size && s->compression == AMP_COMPRESSION_NONE)) {
        /* Pipes and decompressors: the size could not be checked up front. */
        unsigned char extra;
        size_t got = 0;
        AMP_CHECK_GOTO(amp_source_read(s, &extra, 1, &got, err), rc, fail);
        if (got)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_CORRUPT,
                           "%s: byte %" PRIu64 ": trailing bytes after the last index array",
                           s->name, expect);
    }
    t->nnz = nnz;
    info->index_base = (int)base;
    info->entries = nnz;
    info->bytes = expect;
    return AMP_OK;
fail:
    amp_coo_free(t);
    return rc;
}
