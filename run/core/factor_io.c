/* Factor matrices to and from files, in the user's original index space.
 *
 * Text is SPLATT's layout (one row per line, values separated by spaces,
 * lambda one value per line) so existing scripts read it; .npy is NumPy's
 * format 1.0 (a padded dictionary header, then the array in C order), so
 * numpy.load reads it; ktensor is the one-file text layout of the Tensor
 * Toolbox, pyttb (import_data) and GenTen, so those read the model whole.
 * Rows the file dropped as empty slices are zero in the output; in a start
 * (--init) they count through amp_cpd.start_gram. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "amp_alloc.h"
#include "amp_core.h"
#include "amp_outfile.h"
#include "amp_threads.h"

/* Rows formatted per thread and written in order, a batch at a time, so a
 * factor of millions of rows needs neither one thread nor one huge buffer. */
#define ROWS_PER_PIECE 2048

typedef struct out_matrix {
    const double *A;          /* compact rows x R */
    uint64_t rows;            /* rows written */
    unsigned R;
    /* All rows: orig_to_new maps each original index to its compact row
     * (UINT64_MAX: a zero row). Nonempty rows: row i is compact row
     * order[i] (i where order is NULL), its original index new_to_orig of
     * that, printed 1-based before the values in text. */
    const uint64_t *orig_to_new;
    const uint64_t *order, *new_to_orig;
} out_matrix;

static uint64_t compact_row(const out_matrix *m, uint64_t i)
{
    if (m->orig_to_new)
        return m->orig_to_new[i];
    return m->order ? m->order[i] : i;
}

static const double *row_of(const out_matrix *m, uint64_t i)
{
    uint64_t k = compact_row(m, i);
    return k == UINT64_MAX ? NULL : m->A + k * m->R;
}

/* Text of rows [a, b) into buf (room for (b - a) (R + 1) 26 bytes). */
static size_t format_rows(const out_matrix *m, uint64_t a, uint64_t b, int f32, char *buf)
{
    size_t n = 0;
    for (uint64_t i = a; i < b; i++) {
        const double *x = row_of(m, i);
        if (m->orig_to_new == NULL)
            n += (size_t)sprintf(buf + n, "%" PRIu64 " ",
                                 m->new_to_orig[compact_row(m, i)] + 1);
        for (unsigned r = 0; r < m->R; r++) {
            double v = x ? x[r] : 0.0;
            if (f32)
                n += (size_t)sprintf(buf + n, "%s%.9g", r ? " " : "", (double)(float)v);
            else
                n += (size_t)sprintf(buf + n, "%s%.17g", r ? " " : "", v);
        }
        buf[n++] = '\n';
    }
    return n;
}

static size_t pack_rows(const out_matrix *m, uint64_t a, uint64_t b, int f32, char *buf)
{
    size_t n = 0;
    for (uint64_t i = a; i < b; i++) {
        const double *x = row_of(m, i);
        for (unsigned r = 0; r < m->R; r++) {
            double v = x ? x[r] : 0.0;
            if (f32) {
                float f = (float)v;
                memcpy(buf + n, &f, 4);
                n += 4;
            } else {
                memcpy(buf + n, &v, 8);
                n += 8;
            }
        }
    }
    return n;
}

/* The original indices of rows [a, b), 0-based, as little-endian u64. */
static size_t pack_indices(const out_matrix *m, uint64_t a, uint64_t b, char *buf)
{
    size_t n = 0;
    for (uint64_t i = a; i < b; i++) {
        uint64_t v = m->new_to_orig[compact_row(m, i)];
        for (int k = 0; k < 8; k++)
            buf[n++] = (char)(v >> (8 * k));
    }
    return n;
}

enum { AS_TEXT, AS_NPY, AS_INDICES };

static amp_status write_matrix(amp_outfile *of, const out_matrix *m, int how, int f32,
                               amp_error *err)
{
    int T = amp_max_threads();
    size_t piece_bytes = (size_t)ROWS_PER_PIECE * (m->R + 1) * 26 + 1;
    char *buf = amp_alloc((size_t)T * piece_bytes, "factor output", err);
    size_t *len = malloc((size_t)T * sizeof *len);
    amp_status rc = AMP_OK;
    if (buf == NULL || len == NULL) {
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (uint64_t base = 0; base < m->rows && rc == AMP_OK;
         base += (uint64_t)T * ROWS_PER_PIECE) {
#pragma omp parallel num_threads(T)
        {
            int me = amp_thread_id();
            uint64_t a = base + (uint64_t)me * ROWS_PER_PIECE, b = a + ROWS_PER_PIECE;
            if (a > m->rows)
                a = m->rows;
            if (b > m->rows)
                b = m->rows;
            char *p = buf + (size_t)me * piece_bytes;
            len[me] = how == AS_NPY ? pack_rows(m, a, b, f32, p)
                      : how == AS_INDICES ? pack_indices(m, a, b, p)
                                          : format_rows(m, a, b, f32, p);
        }
        for (int t = 0; t < T && rc == AMP_OK; t++)
            rc = amp_outfile_write(of, buf + (size_t)t * piece_bytes, len[t], err);
    }
done:
    amp_free(buf);
    free(len);
    return rc;
}

static amp_status write_lambda(amp_outfile *of, const double *lambda, unsigned R, int npy,
                               int f32, amp_error *err)
{
    char line[40];
    for (unsigned r = 0; r < R; r++) {
        size_t n;
        if (npy && f32) {
            float f = (float)lambda[r];
            AMP_CHECK(amp_outfile_write(of, &f, 4, err));
            continue;
        }
        if (npy) {
            AMP_CHECK(amp_outfile_write(of, &lambda[r], 8, err));
            continue;
        }
        n = (size_t)snprintf(line, sizeof line, f32 ? "%.9g\n" : "%.17g\n",
                             f32 ? (double)(float)lambda[r] : lambda[r]);
        AMP_CHECK(amp_outfile_write(of, line, n, err));
    }
    return AMP_OK;
}

/* NumPy format 1.0: magic, version, little-endian u16 header length, the
 * dictionary padded with spaces and a newline so the data starts on a
 * 64-byte boundary. cols 0: a vector of rows entries. */
static amp_status write_npy_header(amp_outfile *of, const char *descr, uint64_t rows,
                                   unsigned cols, amp_error *err)
{
    char dict[160], head[256];
    int n = cols == 0 ? snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                                 "'shape': (%" PRIu64 ",), }", descr, rows)
                      : snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                                 "'shape': (%" PRIu64 ", %u), }", descr, rows, cols);
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t hlen = padded - 10;
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (char)(hlen & 0xff);
    head[9] = (char)(hlen >> 8);
    memcpy(head + 10, dict, (size_t)n);
    memset(head + 10 + n, ' ', padded - total);
    head[padded - 1] = '\n';
    return amp_outfile_write(of, head, padded, err);
}

/* PREFIX.modeN.EXT, PREFIX.WHAT.EXT, or with index PREFIX.modeN.index.npy. */
static char *file_name(const char *prefix, const char *what, unsigned mode, int npy)
{
    size_t n = strlen(prefix) + 32;
    char *s = malloc(n);
    if (s == NULL)
        return NULL;
    const char *ext = npy ? "npy" : "mat";
    if (what && strcmp(what, "ktn") == 0)
        snprintf(s, n, "%s.ktn", prefix);
    else if (what)
        snprintf(s, n, "%s.%s.%s", prefix, what, ext);
    else
        snprintf(s, n, "%s.mode%u.%s", prefix, mode + 1, ext);
    return s;
}

static char *index_name(const char *prefix, unsigned mode)
{
    size_t n = strlen(prefix) + 32;
    char *s = malloc(n);
    if (s != NULL)
        snprintf(s, n, "%s.mode%u.index.npy", prefix, mode + 1);
    return s;
}

static uint64_t *inverse_relabel(const amp_tensor *t, unsigned m, amp_error *err)
{
    size_t bytes;
    if (amp_mul_size((size_t)t->dims[m], sizeof(uint64_t), &bytes, err) != AMP_OK)
        return NULL;
    uint64_t *inv = amp_huge_alloc(bytes + 1, "the output row map", err);
    if (inv == NULL)
        return NULL;
    memset(inv, 0xff, bytes);
    for (uint64_t k = 0; k < t->rows[m]; k++)
        inv[t->new_to_orig[m][k]] = k;
    return inv;
}

static const uint64_t *sort_key;

static int by_original_index(const void *x, const void *y)
{
    uint64_t a = sort_key[*(const uint64_t *)x], b = sort_key[*(const uint64_t *)y];
    return (a > b) - (a < b);
}

/* The compact rows of mode m in ascending original index: NULL in *order
 * where the relabelling keeps that order already (no sort, no memory). */
static amp_status nonempty_order(const amp_tensor *t, unsigned m, uint64_t **order,
                                 amp_error *err)
{
    const uint64_t *orig = t->new_to_orig[m];
    uint64_t n = t->rows[m], k = 1;
    *order = NULL;
    while (k < n && orig[k - 1] < orig[k])
        k++;
    if (k >= n)
        return AMP_OK;
    uint64_t *o = amp_huge_alloc((size_t)n * sizeof *o, "the output row order", err);
    if (o == NULL)
        return err ? err->status : AMP_ERR_NOMEM;
    for (uint64_t i = 0; i < n; i++)
        o[i] = i;
    sort_key = orig;   /* qsort has no context argument; one writer at a time */
    qsort(o, (size_t)n, sizeof *o, by_original_index);
    *order = o;
    return AMP_OK;
}

static uint64_t clamp_u64(double x)
{
    return x >= 0x1p64 ? UINT64_MAX : (uint64_t)x;
}

amp_status amp_factors_check_room(const amp_tensor *t, unsigned rank, amp_factor_format format,
                                  amp_factor_rows rows, uint64_t mem_available,
                                  const char *dir, amp_error *err)
{
    if (rows == AMP_ROWS_NONEMPTY)
        return AMP_OK;
    uint64_t nonempty = 0, all = 0;
    double file = 0;
    unsigned widest = 0;
    for (unsigned m = 0; m < t->nmodes; m++) {
        nonempty += t->rows[m];
        all += t->dims[m];
        /* An empty row is R zeros: 8 bytes each in npy (f64), at least
         * "0 " in text. */
        file += (double)t->dims[m] * rank * (format == AMP_FACTORS_NPY ? 8 : 2);
        if (t->dims[m] > t->dims[widest])
            widest = m;
    }
    /* One row map at a time, the largest mode's the largest. */
    double map = (double)t->dims[widest] * 8;
    char a[32], b[32];
    if (map >= (double)mem_available)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "mode %u has %" PRIu64 " indices: writing its "
                        "factor in the original index space needs a row map of %s, more than "
                        "the %s of memory available; --rows nonempty writes only the %" PRIu64
                        " nonempty rows of the %u modes, each with its index", widest + 1,
                        t->dims[widest], amp_format_bytes(a, sizeof a, clamp_u64(map)),
                        amp_format_bytes(b, sizeof b, mem_available), nonempty, t->nmodes);
    struct statvfs fs;
    /* A file system of no blocks (sysfs, procfs) tells nothing of room. */
    if (dir != NULL && statvfs(dir, &fs) == 0 && fs.f_blocks > 0) {
        double room = (double)fs.f_bavail * (double)fs.f_frsize;
        /* Where every row is nonempty, --rows nonempty writes the same rows
         * and their indices besides: no help. */
        if (file > room && nonempty == all)
            return AMP_FAIL(err, AMP_ERR_IO, "the factor files take at least %s (mode %u has "
                            "%" PRIu64 " rows), more than the %s free in %s",
                            amp_format_bytes(a, sizeof a, clamp_u64(file)), widest + 1,
                            t->dims[widest], amp_format_bytes(b, sizeof b, clamp_u64(room)),
                            dir);
        if (file > room)
            return AMP_FAIL(err, AMP_ERR_IO, "the factor files in the original index space "
                            "take at least %s (mode %u has %" PRIu64 " rows), more than the %s "
                            "free in %s; --rows nonempty writes only the %" PRIu64 " nonempty "
                            "rows of the %u modes, each with its index",
                            amp_format_bytes(a, sizeof a, clamp_u64(file)), widest + 1,
                            t->dims[widest], amp_format_bytes(b, sizeof b, clamp_u64(room)),
                            dir, nonempty, t->nmodes);
    }
    return AMP_OK;
}

char *amp_factors_file_name(const char *prefix, unsigned nmodes, amp_factor_format format,
                            amp_factor_rows rows, unsigned k, int *more)
{
    const int npy = format == AMP_FACTORS_NPY, index = npy && rows == AMP_ROWS_NONEMPTY;
    /* factors, lambda, the index files (npy, nonempty rows), the
     * manifest; a ktensor is one file */
    unsigned files = format == AMP_FACTORS_KTENSOR ? 1 : nmodes + 2 + (index ? nmodes : 0);
    *more = k < files;
    if (k >= files)
        return NULL;
    if (format == AMP_FACTORS_KTENSOR)
        return file_name(prefix, "ktn", 0, 0);
    if (k < nmodes)
        return file_name(prefix, NULL, k, npy);
    if (k == nmodes)
        return file_name(prefix, "lambda", 0, npy);
    if (k == files - 1) {
        size_t n = strlen(prefix) + 16;
        char *s = malloc(n);
        if (s != NULL)
            snprintf(s, n, "%s.manifest", prefix);
        return s;
    }
    return index_name(prefix, k - nmodes - 1);
}

/* 128 bits that no other run shares: the kernel's random bytes, or where
 * it has none to give, the time and process. */
static void new_run_id(char *hex)
{
    unsigned char b[16];
    if (getrandom(b, sizeof b, GRND_NONBLOCK) != (ssize_t)sizeof b) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x[2] = {(uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                         (uint64_t)getpid() * 0x9e3779b97f4a7c15u ^ (uint64_t)(uintptr_t)hex};
        memcpy(b, x, sizeof b);
    }
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", b[i]);
}

amp_status amp_factors_create(amp_factor_files *ff, const amp_tensor *t, const char *prefix,
                              amp_factor_format format, amp_factor_rows rows, amp_error *err)
{
    memset(ff, 0, sizeof *ff);
    ff->nmodes = t->nmodes;
    ff->format = format;
    ff->rows = rows;
    amp_status rc = AMP_OK;
    if (format == AMP_FACTORS_KTENSOR && rows != AMP_ROWS_ALL)
        return AMP_FAIL(err, AMP_ERR_USAGE, "a ktensor file holds every row of every mode; "
                        "--rows nonempty needs text or npy");
    ff->manifest = format != AMP_FACTORS_KTENSOR;
    new_run_id(ff->run_id);
    for (unsigned f = 0;; f++) {
        int more;
        char *name = amp_factors_file_name(prefix, t->nmodes, format, rows, f, &more);
        if (!more)
            break;
        if (name == NULL)
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
        rc = amp_outfile_open(&ff->out[f], name, err);
        free(name);
        if (rc != AMP_OK)
            goto fail;
        ff->nfiles++;
    }
    return AMP_OK;
fail:
    amp_factors_abort(ff);
    return rc;
}

/* Mode m's factor into its file (and its index file). */
static amp_status write_factor(amp_factor_files *ff, const amp_tensor *t, const amp_cpd *c,
                               unsigned m, int f32, amp_outfile *of, amp_error *err)
{
    const int npy = ff->format == AMP_FACTORS_NPY;
    const char *descr = f32 ? "<f4" : "<f8";
    amp_status rc = AMP_OK;
    if (ff->rows == AMP_ROWS_ALL) {
        uint64_t *inv = inverse_relabel(t, m, err);
        if (inv == NULL)
            return err ? err->status : AMP_ERR_NOMEM;
        out_matrix om = {c->A[m], t->dims[m], c->rank, inv, NULL, t->new_to_orig[m]};
        if (npy)
            rc = write_npy_header(of, descr, t->dims[m], c->rank, err);
        if (rc == AMP_OK)
            rc = write_matrix(of, &om, npy ? AS_NPY : AS_TEXT, f32, err);
        amp_huge_free(inv, (size_t)t->dims[m] * sizeof(uint64_t) + 1);
        return rc;
    }
    uint64_t *order;
    AMP_CHECK(nonempty_order(t, m, &order, err));
    out_matrix om = {c->A[m], t->rows[m], c->rank, NULL, order, t->new_to_orig[m]};
    if (npy)
        rc = write_npy_header(of, descr, t->rows[m], c->rank, err);
    if (rc == AMP_OK)
        rc = write_matrix(of, &om, npy ? AS_NPY : AS_TEXT, f32, err);
    amp_outfile *ix = &ff->out[t->nmodes + 1 + m];
    if (rc == AMP_OK && npy)
        rc = write_npy_header(ix, "<u8", t->rows[m], 0, err);
    if (rc == AMP_OK && npy)
        rc = write_matrix(ix, &om, AS_INDICES, 0, err);
    amp_huge_free(order, (size_t)t->rows[m] * sizeof(uint64_t));
    return rc;
}

/* The ktensor layout as pyttb's export_data writes it: "ktensor", the
 * number of modes, the dimensions, the rank, the weights on one line, then
 * each factor as a "matrix" of 2 dimensions, a row per line. pyttb reads
 * numbers separated by any white space, so SPLATT's rows serve as they
 * are. */
static amp_status write_ktensor(amp_factor_files *ff, const amp_tensor *t, const amp_cpd *c,
                                int f32, amp_error *err)
{
    amp_outfile *of = &ff->out[0];
    const unsigned R = c->rank;
    char line[64];
    int n = snprintf(line, sizeof line, "ktensor\n%u\n", t->nmodes);
    AMP_CHECK(amp_outfile_write(of, line, (size_t)n, err));
    for (unsigned m = 0; m < t->nmodes; m++) {
        n = snprintf(line, sizeof line, "%s%" PRIu64, m ? " " : "", t->dims[m]);
        AMP_CHECK(amp_outfile_write(of, line, (size_t)n, err));
    }
    n = snprintf(line, sizeof line, "\n%u\n", R);
    AMP_CHECK(amp_outfile_write(of, line, (size_t)n, err));
    for (unsigned r = 0; r < R; r++) {
        n = snprintf(line, sizeof line, f32 ? "%s%.9g" : "%s%.17g", r ? " " : "",
                     f32 ? (double)(float)c->lambda[r] : c->lambda[r]);
        AMP_CHECK(amp_outfile_write(of, line, (size_t)n, err));
    }
    AMP_CHECK(amp_outfile_write(of, "\n", 1, err));
    for (unsigned m = 0; m < t->nmodes; m++) {
        n = snprintf(line, sizeof line, "matrix\n2\n%" PRIu64 " %u\n", t->dims[m], R);
        AMP_CHECK(amp_outfile_write(of, line, (size_t)n, err));
        AMP_CHECK(write_factor(ff, t, c, m, f32, of, err));
    }
    return AMP_OK;
}

/* Size and XXH3-64 of the file open as fd, read back from its start. */
static amp_status hash_fd(int fd, const char *path, uint64_t *size, uint64_t *hash,
                          amp_error *err)
{
    XXH3_state_t *st = XXH3_createState();
    char *buf = malloc(1 << 20);
    amp_status rc = AMP_OK;
    if (st == NULL || buf == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
    XXH3_64bits_reset(st);
    uint64_t at = 0;
    for (;;) {
        ssize_t r = pread(fd, buf, 1 << 20, (off_t)at);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_IO, "%s: %s", path, strerror(errno));
        if (r == 0)
            break;
        XXH3_64bits_update(st, buf, (size_t)r);
        at += (uint64_t)r;
    }
    *size = at;
    *hash = XXH3_64bits_digest(st);
done:
    free(buf);
    XXH3_freeState(st);
    return rc;
}

static const char *base_of(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The manifest (see amp_core.h) of ff's other files, written but not yet
 * finished, into the last one. */
static amp_status write_manifest(amp_factor_files *ff, amp_error *err)
{
    amp_outfile *man = &ff->out[ff->nfiles - 1];
    char line[PATH_MAX + 96];
    int n = snprintf(line, sizeof line, "amped factor set 1\nrun %s\n", ff->run_id);
    AMP_CHECK(amp_outfile_write(man, line, (size_t)n, err));
    for (unsigned f = 0; f + 1 < ff->nfiles; f++) {
        amp_outfile *of = &ff->out[f];
        const char *name = base_of(of->final_path);
        if (amp_outfile_direct(of)) {
            n = snprintf(line, sizeof line, "file - - %s\n", name);
        } else {
            uint64_t size, hash;
            AMP_CHECK(hash_fd(of->fd, of->final_path, &size, &hash, err));
            n = snprintf(line, sizeof line, "file %" PRIu64 " %016" PRIx64 " %s\n", size, hash,
                         name);
        }
        if (n < 0 || (size_t)n >= sizeof line)
            return AMP_FAIL(err, AMP_ERR_USAGE, "%s: the name is too long", of->final_path);
        AMP_CHECK(amp_outfile_write(man, line, (size_t)n, err));
    }
    return AMP_OK;
}

amp_status amp_factors_finish(amp_factor_files *ff, const amp_tensor *t, const amp_cpd *c,
                              amp_precision precision, amp_error *err)
{
    const unsigned N = t->nmodes;
    const int npy = ff->format == AMP_FACTORS_NPY, f32 = precision == AMP_PRECISION_F32;
    amp_status rc = AMP_OK;
    if (ff->format == AMP_FACTORS_KTENSOR) {
        AMP_CHECK_GOTO(write_ktensor(ff, t, c, f32, err), rc, fail);
        goto finish;
    }
    for (unsigned m = 0; m < N; m++)
        AMP_CHECK_GOTO(write_factor(ff, t, c, m, f32, &ff->out[m], err), rc, fail);
    if (npy)
        AMP_CHECK_GOTO(write_npy_header(&ff->out[N], f32 ? "<f4" : "<f8", c->rank, 0, err),
                       rc, fail);
    AMP_CHECK_GOTO(write_lambda(&ff->out[N], c->lambda, c->rank, npy, f32, err), rc, fail);
    if (ff->manifest)
        AMP_CHECK_GOTO(write_manifest(ff, err), rc, fail);
finish:
    /* Every file complete and on disk before any takes its name (the
     * caller places them, with its other outputs). */
    for (unsigned f = 0; f < ff->nfiles; f++)
        AMP_CHECK_GOTO(amp_outfile_finish(&ff->out[f], err), rc, fail);
    return AMP_OK;
fail:
    amp_factors_abort(ff);
    return rc;
}

size_t amp_factors_outfiles(amp_factor_files *ff, amp_outfile **list)
{
    for (unsigned f = 0; f < ff->nfiles; f++)
        list[f] = &ff->out[f];
    return ff->nfiles;
}

void amp_factors_abort(amp_factor_files *ff)
{
    for (unsigned f = 0; f < ff->nfiles; f++)
        amp_outfile_abort(&ff->out[f]);
    ff->nfiles = 0;
}

amp_status amp_factors_write(const amp_tensor *t, const amp_cpd *c, const char *prefix,
                             amp_factor_format format, amp_precision precision,
                             amp_error *err)
{
    amp_factor_files ff;
    amp_outfile *list[2 * AMP_MAX_MODES + 2];
    AMP_CHECK(amp_factors_create(&ff, t, prefix, format, AMP_ROWS_ALL, err));
    AMP_CHECK(amp_factors_finish(&ff, t, c, precision, err));
    size_t n = amp_factors_outfiles(&ff, list);
    amp_status rc = amp_outfile_place_all(list, n, err);
    amp_factors_abort(&ff);
    return rc;
}

/* ---- reading starting factors ------------------------------------------- */

/* A set's manifest as read: each file's name, size and XXH3-64. */
typedef struct manifest_file {
    char *name;
    int special;   /* written directly: nothing to compare */
    uint64_t size, hash;
} manifest_file;

typedef struct manifest {
    char *path;    /* NULL: the set has none */
    char run[64];
    manifest_file *files;
    size_t n;
} manifest;

static void manifest_free(manifest *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->files[i].name);
    free(m->files);
    free(m->path);
    memset(m, 0, sizeof *m);
}

/* One "file SIZE HASH NAME" line into m. */
static amp_status manifest_line(manifest *m, char *line, uint64_t lineno, amp_error *err)
{
    char size[32], hash[32];
    int at = 0;
    line[strcspn(line, "\n")] = '\0';
    if (sscanf(line, "file %31s %31s %n", size, hash, &at) != 2 || at == 0 || line[at] == '\0')
        return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": expected 'file SIZE XXH3 NAME'",
                        m->path, lineno);
    manifest_file f = {0};
    f.special = strcmp(size, "-") == 0;
    if (!f.special) {
        char *e1, *e2;
        errno = 0;
        f.size = strtoull(size, &e1, 10);
        f.hash = strtoull(hash, &e2, 16);
        if (errno || *e1 || *e2)
            return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": a size or checksum that is "
                            "not a number", m->path, lineno);
    }
    manifest_file *grown = realloc(m->files, (m->n + 1) * sizeof *grown);
    f.name = strdup(line + at);
    if (grown == NULL || f.name == NULL) {
        free(f.name);
        if (grown)
            m->files = grown;
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    m->files = grown;
    m->files[m->n++] = f;
    return AMP_OK;
}

/* PREFIX.manifest into m; m->path stays NULL where there is none. */
static amp_status read_manifest(const char *prefix, manifest *m, amp_error *err)
{
    memset(m, 0, sizeof *m);
    int more;
    /* the manifest is the last name of a text set of any mode count */
    char *path = amp_factors_file_name(prefix, 1, AMP_FACTORS_TEXT, AMP_ROWS_ALL, 2, &more);
    if (path == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    FILE *fp = fopen(path, "r");
    if (fp == NULL) {
        int e = errno;
        free(path);
        return e == ENOENT ? AMP_OK : AMP_FAIL(err, AMP_ERR_IO, "%s.manifest: %s", prefix,
                                               strerror(e));
    }
    m->path = path;
    char *line = NULL;
    size_t cap = 0;
    uint64_t lineno = 0;
    amp_status rc = AMP_OK;
    while (rc == AMP_OK && getline(&line, &cap, fp) != -1) {
        lineno++;
        if (lineno == 1 && strcmp(line, "amped factor set 1\n") != 0)
            rc = strncmp(line, "amped factor set ", 17) == 0
                     ? AMP_FAIL(err, AMP_ERR_VERSION, "%s: a manifest of a later version (%s)",
                                path, strtok(line + 17, "\n"))
                     : AMP_FAIL(err, AMP_ERR_PARSE, "%s: not a manifest of amped factor files",
                                path);
        else if (lineno == 2 && sscanf(line, "run %63s", m->run) != 1)
            rc = AMP_FAIL(err, AMP_ERR_PARSE, "%s:2: expected 'run ID'", path);
        else if (lineno > 2)
            rc = manifest_line(m, line, lineno, err);
    }
    if (rc == AMP_OK && lineno < 2)
        rc = AMP_FAIL(err, AMP_ERR_TRUNCATED, "%s: ends before its run identifier", path);
    free(line);
    fclose(fp);
    if (rc != AMP_OK)
        manifest_free(m);
    return rc;
}

/* path, a file of the set about to be read, checked against m: listed,
 * and of the size and checksum listed. */
static amp_status check_member(const manifest *m, const char *path, amp_error *err)
{
    if (m->path == NULL)
        return AMP_OK;
    const char *name = base_of(path);
    const manifest_file *f = NULL;
    for (size_t i = 0; i < m->n && f == NULL; i++)
        if (strcmp(m->files[i].name, name) == 0)
            f = &m->files[i];
    if (f == NULL)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: not in %s, the set of run %s: a file of "
                        "another run", path, m->path, m->run);
    if (f->special)
        return AMP_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: %s", path, strerror(errno));
    uint64_t size, hash;
    amp_status rc = hash_fd(fd, path, &size, &hash, err);
    close(fd);
    AMP_CHECK(rc);
    if (size != f->size || hash != f->hash)
        return AMP_FAIL(err, AMP_ERR_CORRUPT, "%s: not the file of run %s that %s lists "
                        "(%s differs): the set mixes the files of two runs, as a run stopped "
                        "while they took their names leaves it; write the factors again",
                        path, m->run, m->path, size != f->size ? "its size" : "its checksum");
    return AMP_OK;
}

/* How many numbers the line holds from p on (strtod's view of one). */
static unsigned count_values(const char *p)
{
    unsigned n = 0;
    for (;;) {
        char *end;
        (void)strtod(p, &end);
        if (end == p)
            return n;
        n++;
        p = end;
    }
}

/* Where a line holds found values instead of R: a factor file's line
 * holds its rank, so say which rank it has; a lambda file holds one value
 * a line, R of them. */
static amp_status wrong_count(const char *path, uint64_t lineno, unsigned R, unsigned rank,
                              unsigned found, amp_error *err)
{
    if (R == 1 && rank > 0)
        return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": %u values; a lambda file holds "
                        "one value a line, %u lines at rank %u", path, lineno, found, rank,
                        rank);
    if (found == 0)
        return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": expected %u values, found none",
                        path, lineno, R);
    return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": expected %u values, found %u: these "
                    "factors look to be of rank %u; give -r %u to start from them", path,
                    lineno, R, found, found, found);
}

/* One line of exactly R numbers into row (may be NULL: parsed, then
 * dropped). rank: the decomposition's, where a line of a lambda file (R
 * 1) is read; 0 for a factor file. */
static amp_status parse_row(const char *path, uint64_t lineno, char *line, unsigned R,
                            unsigned rank, double *row, amp_error *err)
{
    char *p = line;
    for (unsigned r = 0; r < R; r++) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p) {
            const char *q = p;
            while (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n')
                q++;
            if (*q != '\0' && count_values(q) == 0)
                return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": value %u is not a number",
                                path, lineno, r + 1);
            return wrong_count(path, lineno, R, rank, r + count_values(q), err);
        }
        if (errno == ERANGE && (v > 1 || v < -1))
            return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": value %u is out of range",
                            path, lineno, r + 1);
        /* strtod takes "nan" and "inf": a start from them can only give
         * NaN fits, many iterations later. */
        if (!isfinite(v))
            return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": value %u is not a finite "
                            "number", path, lineno, r + 1);
        if (row)
            row[r] = v;
        p = end;
    }
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    if (*p != '\0' && count_values(p) == 0)
        return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": text after the %u values that is "
                        "not a number", path, lineno, R);
    if (*p != '\0')
        return wrong_count(path, lineno, R, rank, R + count_values(p), err);
    return AMP_OK;
}

/* row row^T added into the upper triangle of G (R x R). */
static void add_outer(const double *row, unsigned R, double *G)
{
    for (unsigned p = 0; p < R; p++)
        if (row[p] != 0)
            for (unsigned q = p; q < R; q++)
                G[p * R + q] += row[p] * row[q];
}

/* Rows of one text matrix; dest maps a file row to a factor row (NULL: a
 * vector, one value per line, into vec). A file row without a factor row
 * (UINT64_MAX) is added into the upper triangle of G instead, through
 * scratch (R values). */
static amp_status read_text(const char *path, uint64_t rows, unsigned R, const uint64_t *dest,
                            double *A, double *vec, double *G, double *scratch, amp_error *err)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    uint64_t i = 0, lineno = 0;
    amp_status rc = AMP_OK;
    while (rc == AMP_OK && getline(&line, &cap, fp) != -1) {
        lineno++;
        if (i == rows) {
            rc = AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": more than %" PRIu64 " rows",
                          path, lineno, rows);
            break;
        }
        if (vec) {
            rc = parse_row(path, lineno, line, 1, (unsigned)rows, vec + i, err);
        } else if (dest[i] != UINT64_MAX) {
            rc = parse_row(path, lineno, line, R, 0, A + dest[i] * R, err);
        } else {
            rc = parse_row(path, lineno, line, R, 0, scratch, err);
            if (rc == AMP_OK)
                add_outer(scratch, R, G);
        }
        i++;
    }
    if (rc == AMP_OK && ferror(fp))
        rc = AMP_FAIL(err, AMP_ERR_IO, "%s: %s", path, strerror(errno));
    if (rc == AMP_OK && i < rows)
        rc = AMP_FAIL(err, AMP_ERR_PARSE, "%s: %" PRIu64 " rows, expected %" PRIu64
                      " (one per index of the mode)", path, i, rows);
    free(line);
    fclose(fp);
    return rc;
}

/* G (R x R, upper triangle filled) made symmetric and kept as mode m's
 * start_gram, or freed where it is zero. */
static void keep_start_gram(amp_cpd *c, unsigned m, double *G)
{
    const unsigned R = c->rank;
    int zero = 1;
    for (unsigned p = 0; p < R; p++)
        for (unsigned q = p; q < R; q++) {
            G[q * R + p] = G[p * R + q];
            zero &= G[p * R + q] == 0;
        }
    if (zero) {
        free(G);
        G = NULL;
    }
    c->start_gram[m] = G;
}

amp_status amp_factors_read(const amp_tensor *t, const char *prefix, unsigned rank,
                            amp_cpd *c, amp_error *err)
{
    /* Random factors first: the allocation, and a defined value for any
     * row the text leaves out (none, once it parses). */
    AMP_CHECK(amp_cpd_init_random(t, rank, 0, c, err));
    manifest man;
    amp_status rc = read_manifest(prefix, &man, err);
    double *scratch = malloc((size_t)rank * sizeof *scratch);
    if (rc == AMP_OK && scratch == NULL)
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    for (unsigned m = 0; m < t->nmodes && rc == AMP_OK; m++) {
        char *name = file_name(prefix, NULL, m, 0);
        uint64_t *inv = name ? inverse_relabel(t, m, err) : NULL;
        /* Only a mode with dropped slices has rows for it. */
        double *G = t->rows[m] < t->dims[m] ? calloc((size_t)rank * rank, sizeof *G) : NULL;
        if (inv == NULL)
            rc = name ? (err ? err->status : AMP_ERR_NOMEM)
                      : AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        else if (G == NULL && t->rows[m] < t->dims[m])
            rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        else if ((rc = check_member(&man, name, err)) == AMP_OK)
            rc = read_text(name, t->dims[m], rank, inv, c->A[m], NULL, G, scratch, err);
        if (rc == AMP_OK && G != NULL)
            keep_start_gram(c, m, G);
        else
            free(G);
        if (inv)
            amp_huge_free(inv, (size_t)t->dims[m] * sizeof(uint64_t) + 1);
        free(name);
    }
    free(scratch);
    char *lname = rc == AMP_OK ? file_name(prefix, "lambda", 0, 0) : NULL;
    FILE *probe = lname ? fopen(lname, "r") : NULL;
    if (probe == NULL && lname != NULL && man.path != NULL) {
        /* listed, yet missing: the run's lambda is lost */
        for (size_t i = 0; i < man.n && rc == AMP_OK; i++)
            if (strcmp(man.files[i].name, base_of(lname)) == 0)
                rc = AMP_FAIL(err, AMP_ERR_IO, "%s: missing, though %s lists it", lname,
                              man.path);
    }
    if (probe != NULL) {
        fclose(probe);
        rc = check_member(&man, lname, err);
        if (rc == AMP_OK)
            rc = read_text(lname, rank, 1, NULL, NULL, c->lambda, NULL, NULL, err);
        /* ALS solves for mode 1 first from the others: lambda goes into
         * the last mode's columns, where it still counts, its dropped
         * rows' Gram included. */
        unsigned L = t->nmodes - 1;
        for (uint64_t i = 0; rc == AMP_OK && i < c->rows[L]; i++)
            for (unsigned r = 0; r < rank; r++)
                c->A[L][i * rank + r] *= c->lambda[r];
        double *G = c->start_gram[L];
        for (unsigned p = 0; rc == AMP_OK && G != NULL && p < rank; p++)
            for (unsigned q = 0; q < rank; q++)
                G[p * rank + q] *= c->lambda[p] * c->lambda[q];
        for (unsigned r = 0; r < rank; r++)
            c->lambda[r] = 1;
    }
    free(lname);
    manifest_free(&man);
    if (rc != AMP_OK)
        amp_cpd_free(c);
    return rc;
}
