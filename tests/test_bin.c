/* FROSTT binary v1: round trips through the writer, hand-made files with
 * 32-bit values, and every corruption reported with its byte offset. */
#include <config.h>

#include <math.h>
#include <zlib.h>

#include "tap.h"
#include "test_util.h"

static void put32(unsigned char *b, uint32_t v) { memcpy(b, &v, 4); }
static void put64(unsigned char *b, uint64_t v) { memcpy(b, &v, 8); }

/* 2 modes, 3 nonzeros, dims 4 x 5, 4-byte indices, 8-byte values:
 * header 28, dims 8 (bytes 28..35), values 24 (36..59),
 * mode 1 indices 12 (60..71), mode 2 indices 12 (72..83). */
static size_t make_bin(unsigned char *b, uint32_t version, uint32_t iw, uint32_t vw)
{
    size_t u = 0;
    put32(b, version); put32(b + 4, iw); put32(b + 8, vw);
    put64(b + 12, 2); put64(b + 20, 3);
    u = 28;
    uint64_t dims[2] = {4, 5};
    for (int m = 0; m < 2; m++) {
        if (iw == 8) put64(b + u, dims[m]); else put32(b + u, (uint32_t)dims[m]);
        u += iw;
    }
    double v[3] = {1.5, -2, 0.25};
    for (int k = 0; k < 3; k++) {
        if (vw == 8) { memcpy(b + u, &v[k], 8); } else { float f = (float)v[k]; memcpy(b + u, &f, 4); }
        u += vw;
    }
    uint64_t idx[2][3] = {{1, 4, 2}, {5, 1, 3}};
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < 3; k++) {
            if (iw == 8) put64(b + u, idx[m][k]); else put32(b + u, (uint32_t)idx[m][k]);
            u += iw;
        }
    return u;
}

static amp_status read_bytes(const char *name, const unsigned char *b, size_t n, amp_coo *t,
                             amp_error *err)
{
    const char *p = write_file(name, b, n);
    amp_read_opts o;
    amp_read_opts_init(&o);
    amp_error_clear(err);
    return amp_read_tensor(p, &o, t, NULL, err);
}

static void expect_bin_error(const unsigned char *b, size_t n, amp_status st, const char *want,
                             const char *what)
{
    amp_coo t;
    amp_error err;
    amp_status rc = read_bytes("bad.bin", b, n, &t, &err);
    if (!ok(rc == st && strstr(err.msg, want), "%s", what))
        diag("status %d (want %d): '%s' (want '%s')", rc, st, err.msg, want);
    amp_coo_free(&t);
}

int main(void)
{
    unsigned char b[512];
    amp_coo t;
    amp_error err;
    for (uint32_t iw = 4; iw <= 8; iw += 4)
        for (uint32_t vw = 4; vw <= 8; vw += 4) {
            size_t n = make_bin(b, 1, iw, vw);
            amp_status rc = read_bytes("ok.bin", b, n, &t, &err);
            ok(rc == AMP_OK && t.nmodes == 2 && t.nnz == 3 && t.dims[0] == 4 && t.dims[1] == 5 &&
               t.ind[0][1] == 3 && t.ind[1][0] == 4 && t.val[0] == 1.5 && t.val[2] == 0.25,
               "hand-made .bin, %u-byte indices, %u-byte values", iw, vw);
            if (rc) diag("%s", err.msg);
            amp_coo_free(&t);
        }

    size_t n = make_bin(b, 1, 4, 8);
    unsigned char c[512];
#define MUTATE(off, bytes, value) do { memcpy(c, b, n); memcpy(c + (off), &(value), bytes); } while (0)
    uint32_t u32;
    uint64_t u64;
    double d;
    u32 = 2; MUTATE(0, 4, u32);
    expect_bin_error(c, n, AMP_ERR_VERSION, "bad.bin: byte 0: FROSTT binary version 2; amped reads version 1", "version 2");
    u32 = 3; MUTATE(4, 4, u32);
    expect_bin_error(c, n, AMP_ERR_CORRUPT, "byte 4: index width 3 bytes", "index width 3");
    u32 = 2; MUTATE(8, 4, u32);
    expect_bin_error(c, n, AMP_ERR_CORRUPT, "byte 8: value width 2 bytes", "value width 2");
    u64 = 1; MUTATE(12, 8, u64);
    expect_bin_error(c, n, AMP_ERR_CORRUPT, "byte 12: 1 modes", "one mode");
    u64 = 0; MUTATE(20, 8, u64);
    expect_bin_error(c, n, AMP_ERR_EMPTY, "byte 20: the header says 0 nonzeros", "0 nonzeros");
    u64 = (uint64_t)1 << 62; MUTATE(20, 8, u64);
    expect_bin_error(c, n, AMP_ERR_CORRUPT, "impossibly large", "absurd nonzero count");
    expect_bin_error(b, n - 5, AMP_ERR_CORRUPT, "needs 84 bytes but the file has 79 (truncated)", "truncated");
    memcpy(c, b, n); c[n] = 0;
    expect_bin_error(c, n + 1, AMP_ERR_CORRUPT, "has 85 (trailing bytes)", "trailing bytes");
    expect_bin_error(b, 20, AMP_ERR_CORRUPT, "truncated at byte 20 while reading the header", "short header");
    {
        /* Through gzip the size is unknown up front: trailing bytes are
         * found after the last array. */
        memcpy(c, b, n); c[n] = 7;
        const char *gp = test_path("trail.bin.gz");
        gzFile g = gzopen(gp, "wb");
        gzwrite(g, c, (unsigned)n + 1);
        gzclose(g);
        amp_read_opts o;
        amp_read_opts_init(&o);
        amp_error_clear(&err);
        amp_status rc = amp_read_tensor(gp, &o, &t, NULL, &err);
        ok(rc == AMP_ERR_CORRUPT && strstr(err.msg, "trail.bin.gz: byte 84: trailing bytes"),
           "gzip'd .bin with trailing bytes refused");
        if (rc != AMP_ERR_CORRUPT) diag("%d %s", rc, err.msg);
        amp_coo_free(&t);
        g = gzopen(gp, "wb");
        gzwrite(g, b, (unsigned)n);
        gzclose(g);
        amp_error_clear(&err);
        rc = amp_read_tensor(gp, &o, &t, NULL, &err);
        ok(rc == AMP_OK && t.nnz == 3 && t.val[1] == -2, "gzip'd .bin reads");
        amp_coo_free(&t);
    }
    u32 = 0; MUTATE(32, 4, u32);
    expect_bin_error(c, n, AMP_ERR_CORRUPT, "byte 32: dimension 0 of mode 2", "zero dimension");
    d = NAN; MUTATE(44, 8, d);
    expect_bin_error(c, n, AMP_ERR_PARSE, "byte 44: value of nonzero 2 is not finite", "NaN value");
    d = -INFINITY; MUTATE(52, 8, d);
    expect_bin_error(c, n, AMP_ERR_PARSE, "byte 52: value of nonzero 3 is not finite", "infinite value");
    u32 = 0; MUTATE(64, 4, u32);
    expect_bin_error(c, n, AMP_ERR_RANGE, "byte 64: index 0 of nonzero 2 in mode 1 is outside 1..4", "index 0");
    u32 = 6; MUTATE(80, 4, u32);
    expect_bin_error(c, n, AMP_ERR_RANGE, "byte 80: index 6 of nonzero 3 in mode 2 is outside 1..5", "index beyond dim");

    /* Writer round trip, both index widths, several thread counts; the
     * third case is large enough for the parallel pread path (> 16 MiB
     * per array). */
    for (int round = 0; round < 3; round++) {
        const int wide = round > 0;
        const uint64_t nnz = round == 2 ? 2200000 : 100000;
        amp_coo r;
        amp_coo_init(&r, 3, &err);
        amp_coo_reserve(&r, nnz, &err);
        uint64_t s = 99 + (uint64_t)wide;
        r.dims[0] = wide ? ((uint64_t)1 << 40) : 1000;
        r.dims[1] = 77;
        r.dims[2] = 5;
        for (uint64_t k = 0; k < nnz; k++) {
            for (unsigned m = 0; m < 3; m++) r.ind[m][k] = rng_next(&s) % r.dims[m];
            uint64_t bits = rng_next(&s);
            memcpy(&r.val[k], &bits, 8);
            if (!isfinite(r.val[k])) r.val[k] = 1.0 / (double)(k + 1);
        }
        r.ind[0][5] = r.dims[0] - 1;
        r.nnz = nnz;
        const char *p = test_path(wide ? "rt64.bin" : "rt32.bin");
        ok(amp_write_bin(&r, p, 0, &err) == AMP_OK, "write .bin (%s indices, %llu nonzeros)",
           wide ? "64-bit" : "32-bit", (unsigned long long)nnz);
        FILE *f = fopen(p, "rb");
        uint32_t hdr[2] = {0, 0};
        if (f) { if (fread(hdr, 4, 2, f) != 2) hdr[1] = 0; fclose(f); }
        is_int(hdr[1], wide ? 8 : 4, "index width chosen by the largest dimension");
        for (int th = 1; th <= 3; th += 2) {
            set_threads(th);
            amp_read_opts o;
            amp_read_opts_init(&o);
            o.duplicates = AMP_DUP_KEEP;
            amp_error_clear(&err);
            ok(amp_read_tensor(p, &o, &t, NULL, &err) == AMP_OK && coo_equal(&r, &t),
               "read back identical on %d thread%s", th, th > 1 ? "s" : "");
            amp_coo_free(&t);
        }
        if (round == 2) {
            amp_coo_free(&r);
            break;
        }
        /* Text round trip too: values must survive printing exactly. */
        const char *tp = test_path("rt.tns");
        amp_read_opts o;
        amp_read_opts_init(&o);
        o.duplicates = AMP_DUP_KEEP;
        o.ndims = 3;
        memcpy(o.dims, r.dims, sizeof r.dims[0] * 3);
        amp_error_clear(&err);
        ok(amp_write_tns(&r, tp, 0, &err) == AMP_OK && amp_read_tensor(tp, &o, &t, NULL, &err) == AMP_OK &&
           coo_equal(&r, &t), "text round trip is exact (%s)", wide ? "wide dims" : "narrow dims");
        if (err.status) diag("%s", err.msg);
        amp_coo_free(&t);
        amp_coo_free(&r);
    }
    return done_testing();
}
