/* Would streaming a file's compressed chunks and decoding them on the GPU
 * (nvCOMP's Zstandard, then the byte planes) beat streaming the packed
 * 8-byte words that --memory stream sends (issue 28)? Per mode copy of
 * FILE, with every chunk's stored bytes in page-locked host memory:
 *   link:     the stored bytes copied to the device, against nnz x 8 bytes
 *             (the packed stream's volume) from the same kind of memory;
 *   decode:   nvCOMP's batched Zstandard decompression of all the copy's
 *             frames in one call;
 *   planes:   the byte planes turned back into words and values;
 *   pipeline: groups of about 64 MiB of stored bytes (AMP_BENCH_GROUP_MIB),
 *             all copied on one stream while another decodes each group once
 *             it is in: what streaming compressed chunks would take with no
 *             MTTKRP.
 * The decoded copy is checked byte for byte against the host's
 * amp_section_read before anything is timed.
 *
 * With FRAME_KIB, every chunk is first compressed again on the host as
 * frames of FRAME_KIB raw KiB each (level 1, literals uncoded, as
 * amped-prep does), nvCOMP's advice for its decoder being 64 KiB frames:
 * what a format with smaller frames would give. amped writes one frame per
 * chunk of up to --chunk-nnz nonzeros (16 MiB raw in f64).
 *
 * Bytes: the link moves stored_size per chunk; the decoder reads those and
 * writes raw_size (8 + value size per nonzero); the planes pass reads and
 * writes raw_size again.
 *
 * Usage: bench/gpu-zdecode FILE.amp [FRAME_KIB (0: the file's frames)] [ROUNDS (5)]
 * Prints a line per mode and the sums, times the best of ROUNDS. */
#include <config.h>

#include <cuda_runtime.h>
#include <nvcomp/zstd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* For ZSTD_c_literalCompressionMode, as amped-prep sets it. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <vector>

#include "amped_format.h"

#define CK(call)                                                                           \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "gpu-zdecode: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,      \
                    cudaGetErrorString(e_));                                               \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)
#define NV(call)                                                                           \
    do {                                                                                   \
        nvcompStatus_t s_ = (call);                                                        \
        if (s_ != nvcompSuccess) {                                                         \
            fprintf(stderr, "gpu-zdecode: %s:%d: %s: nvCOMP status %d\n", __FILE__,         \
                    __LINE__, #call, (int)s_);                                             \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static void die(const char *what, const amp_error *err)
{
    fprintf(stderr, "gpu-zdecode: %s: %s\n", what, amp_error_message(err));
    exit(1);
}

static size_t up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

/* Planes back to words and values: one thread per nonzero of chunk c.
 * Every plane is read as consecutive bytes by a warp, so each load is one
 * 32-byte sector per warp; words and values are written whole. */
struct chunk_desc {
    uint64_t raw_at;   /* in the copy's raw buffer */
    uint64_t n;
    uint32_t planar_words, planar_values;
};

/* Item k of n little-endian items of type T, from planes (byte b of every
 * item together) or from the raw form. */
template <typename T>
__device__ T item(const unsigned char *in, uint64_t n, uint64_t k, bool planar)
{
    if (!planar)
        return ((const T *)in)[k];
    T v = 0;
    for (unsigned b = 0; b < sizeof(T); b++)
        v |= (T)in[(uint64_t)b * n + k] << (8 * b);
    return v;
}

__global__ void unplane(const unsigned char *raw_in, unsigned char *out,
                        const chunk_desc *chunks, unsigned vsize)
{
    const chunk_desc c = chunks[blockIdx.y];
    const unsigned char *in = raw_in + c.raw_at;
    unsigned char *o = out + c.raw_at;
    for (uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; k < c.n;
         k += (uint64_t)gridDim.x * blockDim.x) {
        ((uint64_t *)o)[k] = item<uint64_t>(in, c.n, k, c.planar_words);
        if (vsize == 8)
            ((uint64_t *)(o + 8 * c.n))[k] = item<uint64_t>(in + 8 * c.n, c.n, k, c.planar_values);
        else
            ((uint32_t *)(o + 8 * c.n))[k] = item<uint32_t>(in + 8 * c.n, c.n, k, c.planar_values);
    }
}

/* One frame for nvCOMP: where its stored bytes are (host and device
 * buffers at the same offset) and where its raw bytes go. */
struct frame {
    size_t stored_at, stored_size, raw_at, raw_size;
};

struct copy_data {
    uint64_t nnz = 0;
    std::vector<chunk_desc> chunks;
    std::vector<frame> frames;
    unsigned char *stored = NULL;   /* page-locked */
    size_t stored_bytes = 0, raw_bytes = 0, file_stored = 0;
    unsigned char *expect = NULL;   /* the host's decoding, for the check */
};

static void load_copy(const amp_file *f, unsigned m, size_t frame_raw, copy_data *cd)
{
    amp_error err = {};
    amp_section_reader *r = NULL;
    if (amp_section_reader_new(f, &r, &err) != AMP_OK)
        die("reader", &err);
    const amp_mode_layout *l = amp_file_mode(f, m);
    std::vector<const amp_section *> secs;
    for (uint32_t s = 0; s < l->nshards; s++)
        for (uint32_t q = 0; q < l->shards[s].nchunks; q++)
            secs.push_back(amp_file_chunk(f, m, s, q));
    for (const amp_section *s : secs) {
        chunk_desc c;
        c.raw_at = cd->raw_bytes;
        c.n = s->count;
        c.planar_words = !!(s->flags & AMP_SECTION_PLANAR_WORDS);
        c.planar_values = !!(s->flags & AMP_SECTION_PLANAR_VALUES);
        cd->chunks.push_back(c);
        cd->raw_bytes = up(cd->raw_bytes + (size_t)s->raw_size, 256);
        cd->nnz += s->count;
        cd->file_stored += (size_t)s->stored_size;
        if (!(s->flags & AMP_SECTION_ZSTD)) {
            fprintf(stderr, "gpu-zdecode: mode %u has an uncompressed chunk; prepare the file "
                    "with --level 1 or more\n", m + 1);
            exit(1);
        }
    }
    cd->expect = (unsigned char *)malloc(cd->raw_bytes);
    unsigned char *planes = (unsigned char *)malloc(cd->raw_bytes);
    if (cd->expect == NULL || planes == NULL) {
        fprintf(stderr, "gpu-zdecode: out of memory\n");
        exit(1);
    }
    /* The stored bytes as the file has them, or the planes compressed again
     * in frames of frame_raw bytes. */
    std::vector<unsigned char> host;
    ZSTD_CCtx *cctx = frame_raw ? ZSTD_createCCtx() : NULL;
    if (cctx) {
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_literalCompressionMode, ZSTD_ps_disable);
    }
    for (size_t i = 0; i < secs.size(); i++) {
        const amp_section *s = secs[i];
        const size_t raw_at = cd->chunks[i].raw_at;
        if (frame_raw == 0) {
            /* The stored bytes read once: kept for the device, decoded here
             * for the check. */
            const void *st = NULL;
            if (amp_section_read_stored(r, s, &st, &err) != AMP_OK ||
                amp_section_decode(r, s, st, cd->expect + raw_at, (size_t)s->raw_size, &err) !=
                    AMP_OK)
                die("reading a chunk", &err);
            const size_t at = up(host.size(), 8);
            host.resize(at + (size_t)s->stored_size);
            memcpy(host.data() + at, st, (size_t)s->stored_size);
            cd->frames.push_back(frame{at, (size_t)s->stored_size, raw_at, (size_t)s->raw_size});
            continue;
        }
        if (amp_section_read(r, s, cd->expect + raw_at, (size_t)s->raw_size, &err) != AMP_OK ||
            amp_section_read_planes(r, s, planes + raw_at, (size_t)s->raw_size, &err) != AMP_OK)
            die("reading a chunk", &err);
        for (size_t o = 0; o < (size_t)s->raw_size; o += frame_raw) {
            const size_t n = std::min(frame_raw, (size_t)s->raw_size - o);
            const size_t at = up(host.size(), 8);
            host.resize(at + ZSTD_compressBound(n));
            size_t z = ZSTD_compress2(cctx, host.data() + at, ZSTD_compressBound(n),
                                      planes + raw_at + o, n);
            if (ZSTD_isError(z)) {
                fprintf(stderr, "gpu-zdecode: ZSTD_compress2: %s\n", ZSTD_getErrorName(z));
                exit(1);
            }
            host.resize(at + z);
            cd->frames.push_back(frame{at, z, raw_at + o, n});
        }
    }
    ZSTD_freeCCtx(cctx);
    free(planes);
    amp_section_reader_free(r);
    cd->stored_bytes = host.size();
    CK(cudaMallocHost(&cd->stored, std::max<size_t>(cd->stored_bytes, 8)));
    memcpy(cd->stored, host.data(), cd->stored_bytes);
}

/* Exit unless the device's decoding of every chunk (out) equals the host's. */
static void check_decoded(const copy_data &cd, const unsigned char *out, unsigned vsize,
                          const char *when)
{
    unsigned char *back = (unsigned char *)malloc(cd.raw_bytes);
    if (back == NULL) {
        fprintf(stderr, "gpu-zdecode: out of memory\n");
        exit(1);
    }
    CK(cudaMemcpy(back, out, cd.raw_bytes, cudaMemcpyDeviceToHost));
    for (size_t c = 0; c < cd.chunks.size(); c++) {
        const size_t n = (size_t)cd.chunks[c].n * (8 + vsize);
        if (memcmp(back + cd.chunks[c].raw_at, cd.expect + cd.chunks[c].raw_at, n) != 0) {
            fprintf(stderr, "gpu-zdecode: chunk %zu %s differs from the host's decoding\n", c,
                    when);
            exit(1);
        }
    }
    free(back);
}

struct timings {
    float link_stored, link_packed, decode, planes, pipeline;
};

static float elapsed(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

/* Device state for one copy: stored bytes, raw planes and output, nvCOMP's
 * per-frame tables and scratch. */
struct device_copy {
    unsigned char *stored, *planes, *out, *packed;
    chunk_desc *chunks;
    void **in_ptrs, **out_ptrs;
    size_t *in_bytes, *out_bytes, *got_bytes;
    nvcompStatus_t *status;
    void *temp;
    size_t temp_bytes;
};

/* Decode frames [f0, f1) (their chunks whole) and the planes of chunks
 * [c0, c1) on stream s. */
static void decode_range(const copy_data &cd, device_copy &d, size_t f0, size_t f1, size_t c0,
                         size_t c1, unsigned vsize, cudaStream_t s)
{
    if (f1 > f0)
        NV(nvcompBatchedZstdDecompressAsync(
            (const void *const *)(d.in_ptrs + f0), d.in_bytes + f0, d.out_bytes + f0,
            d.got_bytes + f0, f1 - f0, d.temp, d.temp_bytes, (void *const *)(d.out_ptrs + f0),
            nvcompBatchedZstdDecompressDefaultOpts, d.status + f0, s));
    if (c1 > c0) {
        dim3 grid(64, (unsigned)(c1 - c0));
        unplane<<<grid, 256, 0, s>>>(d.planes, d.out, d.chunks + c0, vsize);
        CK(cudaGetLastError());
    }
}

static timings run_copy(const copy_data &cd, unsigned vsize, int rounds, int check)
{
    device_copy d;
    const size_t nf = cd.frames.size(), nc = cd.chunks.size();
    const size_t packed_bytes = (size_t)cd.nnz * 8;
    CK(cudaMalloc(&d.stored, std::max<size_t>(cd.stored_bytes, 8)));
    CK(cudaMalloc(&d.planes, cd.raw_bytes));
    CK(cudaMalloc(&d.out, cd.raw_bytes));
    CK(cudaMalloc(&d.packed, packed_bytes));
    CK(cudaMalloc(&d.chunks, nc * sizeof *d.chunks));
    CK(cudaMalloc(&d.in_ptrs, nf * sizeof(void *)));
    CK(cudaMalloc(&d.out_ptrs, nf * sizeof(void *)));
    CK(cudaMalloc(&d.in_bytes, nf * sizeof(size_t)));
    CK(cudaMalloc(&d.out_bytes, nf * sizeof(size_t)));
    CK(cudaMalloc(&d.got_bytes, nf * sizeof(size_t)));
    CK(cudaMalloc(&d.status, nf * sizeof(nvcompStatus_t)));
    nvcompAlignmentRequirements_t align;
    NV(nvcompBatchedZstdDecompressGetRequiredAlignments(nvcompBatchedZstdDecompressDefaultOpts,
                                                        &align));
    for (size_t i = 0; i < nf; i++)
        if (cd.frames[i].stored_at % align.input || cd.frames[i].raw_at % align.output) {
            fprintf(stderr, "gpu-zdecode: frame %zu misaligned for nvCOMP (%zu, %zu)\n", i,
                    align.input, align.output);
            exit(1);
        }
    std::vector<void *> ip(nf), op(nf);
    std::vector<size_t> ib(nf), ob(nf);
    size_t max_raw = 0;
    for (size_t i = 0; i < nf; i++) {
        ip[i] = d.stored + cd.frames[i].stored_at;
        op[i] = d.planes + cd.frames[i].raw_at;
        ib[i] = cd.frames[i].stored_size;
        ob[i] = cd.frames[i].raw_size;
        max_raw = std::max(max_raw, ob[i]);
    }
    CK(cudaMemcpy(d.chunks, cd.chunks.data(), nc * sizeof *d.chunks, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.in_ptrs, ip.data(), nf * sizeof(void *), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.out_ptrs, op.data(), nf * sizeof(void *), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.in_bytes, ib.data(), nf * sizeof(size_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.out_bytes, ob.data(), nf * sizeof(size_t), cudaMemcpyHostToDevice));
    NV(nvcompBatchedZstdDecompressGetTempSize(nf, max_raw, nvcompBatchedZstdDecompressDefaultOpts,
                                              &d.temp_bytes, cd.raw_bytes, 0));
    CK(cudaMalloc(&d.temp, std::max<size_t>(d.temp_bytes, 8)));
    unsigned char *packed_host = NULL;
    CK(cudaMallocHost(&packed_host, packed_bytes));
    memset(packed_host, 0x5a, packed_bytes);

    cudaStream_t s[2];
    cudaEvent_t e[4];
    for (int k = 0; k < 2; k++)
        CK(cudaStreamCreateWithFlags(&s[k], cudaStreamNonBlocking));
    for (int k = 0; k < 4; k++)
        CK(cudaEventCreate(&e[k]));

    /* The check first: decoded on the device, equal to the host's. */
    CK(cudaMemcpy(d.stored, cd.stored, cd.stored_bytes, cudaMemcpyHostToDevice));
    decode_range(cd, d, 0, nf, 0, nc, vsize, s[0]);
    CK(cudaStreamSynchronize(s[0]));
    std::vector<nvcompStatus_t> st(nf);
    std::vector<size_t> got(nf);
    CK(cudaMemcpy(st.data(), d.status, nf * sizeof *d.status, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got.data(), d.got_bytes, nf * sizeof(size_t), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < nf; i++)
        if (st[i] != nvcompSuccess || got[i] != ob[i]) {
            fprintf(stderr, "gpu-zdecode: frame %zu: status %d, %zu bytes of %zu\n", i,
                    (int)st[i], got[i], ob[i]);
            exit(1);
        }
    if (check)
        check_decoded(cd, d.out, vsize, "decoded on the GPU");

    timings best = {1e30f, 1e30f, 1e30f, 1e30f, 1e30f};
    /* Groups for the pipeline: whole chunks, about group_mib MiB of stored
     * bytes. nvCOMP decodes a batch of few frames far below its rate on a
     * whole copy (one frame to a block), so the group trades the pipeline's
     * fill against the decoder's rate. */
    const char *gm = getenv("AMP_BENCH_GROUP_MIB");
    const size_t group_mib = gm && atoi(gm) > 0 ? (size_t)atoi(gm) : 64;
    std::vector<size_t> gf{0}, gc{0};   /* first frame and chunk of each group */
    {
        size_t bytes = 0, c = 0;
        for (size_t i = 0; i < nf; i++) {
            while (c + 1 < nc && cd.frames[i].raw_at >= cd.chunks[c + 1].raw_at)
                c++;
            const int chunk_start = cd.frames[i].raw_at == cd.chunks[c].raw_at;
            if (chunk_start && bytes >= (group_mib << 20)) {
                gf.push_back(i);
                gc.push_back(c);
                bytes = 0;
            }
            bytes += cd.frames[i].stored_size;
        }
        gf.push_back(nf);
        gc.push_back(nc);
    }
    std::vector<cudaEvent_t> copied(gf.size());
    for (auto &x : copied)
        CK(cudaEventCreateWithFlags(&x, cudaEventDisableTiming));
    for (int r = 0; r < rounds; r++) {
        timings t;
        CK(cudaEventRecord(e[0], s[0]));
        CK(cudaMemcpyAsync(d.stored, cd.stored, cd.stored_bytes, cudaMemcpyHostToDevice, s[0]));
        CK(cudaEventRecord(e[1], s[0]));
        t.link_stored = elapsed(e[0], e[1]);
        CK(cudaEventRecord(e[0], s[0]));
        CK(cudaMemcpyAsync(d.packed, packed_host, packed_bytes, cudaMemcpyHostToDevice, s[0]));
        CK(cudaEventRecord(e[1], s[0]));
        t.link_packed = elapsed(e[0], e[1]);
        CK(cudaEventRecord(e[0], s[0]));
        decode_range(cd, d, 0, nf, 0, 0, vsize, s[0]);
        CK(cudaEventRecord(e[1], s[0]));
        decode_range(cd, d, 0, 0, 0, nc, vsize, s[0]);
        CK(cudaEventRecord(e[2], s[0]));
        t.decode = elapsed(e[0], e[1]);
        t.planes = elapsed(e[1], e[2]);
        /* The pipeline: copies on s[1], decoding on s[0]; the device holds
         * the whole copy here, so only the overlap is measured, not a ring. */
        CK(cudaDeviceSynchronize());
        CK(cudaEventRecord(e[0], s[1]));
        for (size_t g = 0; g + 1 < gf.size(); g++) {
            const size_t a = cd.frames[gf[g]].stored_at;
            const size_t b = gf[g + 1] < nf ? cd.frames[gf[g + 1]].stored_at : cd.stored_bytes;
            CK(cudaMemcpyAsync(d.stored + a, cd.stored + a, b - a, cudaMemcpyHostToDevice, s[1]));
            CK(cudaEventRecord(copied[g], s[1]));
        }
        CK(cudaStreamWaitEvent(s[0], e[0], 0));
        for (size_t g = 0; g + 1 < gf.size(); g++) {
            CK(cudaStreamWaitEvent(s[0], copied[g], 0));
            decode_range(cd, d, gf[g], gf[g + 1], gc[g], gc[g + 1], vsize, s[0]);
        }
        CK(cudaEventRecord(e[3], s[0]));
        t.pipeline = elapsed(e[0], e[3]);
        best.link_stored = std::min(best.link_stored, t.link_stored);
        best.link_packed = std::min(best.link_packed, t.link_packed);
        best.decode = std::min(best.decode, t.decode);
        best.planes = std::min(best.planes, t.planes);
        best.pipeline = std::min(best.pipeline, t.pipeline);
    }
    /* The pipelined decode must still be right. */
    if (check)
        check_decoded(cd, d.out, vsize, "after the pipeline");
    for (auto &x : copied)
        CK(cudaEventDestroy(x));
    for (int k = 0; k < 4; k++)
        CK(cudaEventDestroy(e[k]));
    for (int k = 0; k < 2; k++)
        CK(cudaStreamDestroy(s[k]));
    CK(cudaFreeHost(packed_host));
    void *bufs[] = {d.stored, d.planes, d.out, d.packed, d.chunks, d.in_ptrs, d.out_ptrs,
                    d.in_bytes, d.out_bytes, d.got_bytes, d.status, d.temp};
    for (void *b : bufs)
        CK(cudaFree(b));
    return best;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: gpu-zdecode FILE.amp [FRAME_KIB] [ROUNDS]\n");
        return 2;
    }
    const size_t frame_kib = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;
    const int rounds = argc > 3 ? atoi(argv[3]) : 5;
    const int check = getenv("AMP_BENCH_CHECK") == NULL || strcmp(getenv("AMP_BENCH_CHECK"), "0");
    amp_error err = {};
    amp_file *f = NULL;
    if (amp_file_open(argv[1], &f, &err) != AMP_OK)
        die(argv[1], &err);
    const amp_meta *meta = amp_file_meta(f);
    const unsigned vsize = (unsigned)amp_value_size(meta->value_type);
    const char *gm = getenv("AMP_BENCH_GROUP_MIB");
    printf("%s: %u modes, %s values, frames: %s, pipeline groups of %s MiB, best of %d "
           "rounds%s\n", argv[1], meta->nmodes, vsize == 8 ? "f64" : "f32",
           frame_kib ? "recompressed" : "the file's", gm ? gm : "64", rounds,
           check ? ", checked against the host" : "");
    if (frame_kib)
        printf("  frames of %zu KiB raw, level 1, literals uncoded\n", frame_kib);
    printf("mode  nonzeros  frames  B/nnz  link ms (GB/s)  8 B/nnz link ms (GB/s)  decode ms "
           "(raw GB/s)  planes ms  pipeline ms\n");
    double sum[5] = {0}, nnz_all = 0, stored_all = 0;
    for (unsigned m = 0; m < meta->nmodes; m++) {
        copy_data cd;
        load_copy(f, m, frame_kib << 10, &cd);
        const timings t = run_copy(cd, vsize, rounds, check);
        const double raw = (double)cd.nnz * (8 + vsize);
        printf("%4u  %8.3gM  %6zu  %5.2f  %7.2f (%5.1f)  %14.2f (%5.1f)  %9.2f (%6.1f)  %9.2f  "
               "%11.2f\n", m + 1, cd.nnz / 1e6, cd.frames.size(),
               (double)cd.stored_bytes / cd.nnz, t.link_stored,
               cd.stored_bytes / (t.link_stored * 1e6), t.link_packed,
               cd.nnz * 8.0 / (t.link_packed * 1e6), t.decode, raw / (t.decode * 1e6),
               t.planes, t.pipeline);
        sum[0] += t.link_stored;
        sum[1] += t.link_packed;
        sum[2] += t.decode;
        sum[3] += t.planes;
        sum[4] += t.pipeline;
        nnz_all += (double)cd.nnz;
        stored_all += (double)cd.stored_bytes;
        CK(cudaFreeHost(cd.stored));
        free(cd.expect);
    }
    printf(" all  %8.3gM          %5.2f  %7.2f          %14.2f          %9.2f           %9.2f  "
           "%11.2f\n", nnz_all / 1e6, stored_all / nnz_all, sum[0], sum[1], sum[2], sum[3],
           sum[4]);
    printf("all-mode: compressed pipeline %.2f ms against the 8 B/nnz link's %.2f ms (%.2fx)\n",
           sum[4], sum[1], sum[4] / sum[1]);
    amp_file_close(f);
    return 0;
}
