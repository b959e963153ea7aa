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
#include <sys/stat.h>
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

/* Whether m lists the file path names. */
static int set_member(const manifest *m, const char *path)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->files[i].name, base_of(path)) == 0)
            return 1;
    return 0;
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

/* Where one mode's rows go as a reader meets them, by original index: a
 * compact row of A, or, for a slice the .amp file dropped as empty, the
 * upper triangle of G through scratch (see amp_factors_read). */
typedef struct row_sink {
    unsigned R, mode;         /* mode: 0-based, for messages */
    uint64_t dim, rows;       /* indices of the mode; compact rows of A */
    uint64_t *inv;            /* original index -> compact row (UINT64_MAX: dropped) */
    double *A, *G, *scratch;
} row_sink;

static double *sink_row(const row_sink *s, uint64_t i)
{
    return s->inv[i] == UINT64_MAX ? s->scratch : s->A + s->inv[i] * s->R;
}

/* The row that sink_row gave for index i, now filled. */
static void sink_done(const row_sink *s, uint64_t i)
{
    if (s->inv[i] == UINT64_MAX)
        add_outer(s->scratch, s->R, s->G);
}

/* A file of nonempty rows leaves the others out: they are zero, not the
 * random start that c holds until then. */
static void sink_zero(const row_sink *s)
{
    memset(s->A, 0, (size_t)s->rows * s->R * sizeof *s->A);
}

/* A --rows nonempty text line: R + 1 fields, the first of digits alone
 * and not 0 (the 1-based index). Only a file's first line is asked: the
 * layout is the file's. A --rows all file of rank R + 1 whose first row
 * starts with a whole number (1, where the columns' largest values are 1)
 * looks the same; its second line is then refused as an indexed one. A
 * zero row, the row of an empty slice, starts with 0: taken for a row of
 * values, whose count parse_row reports. */
static int indexed_line(const char *line, unsigned R)
{
    const char *p = line + strspn(line, " \t");
    size_t digits = strspn(p, "0123456789");
    if (digits == 0 || *p == '0' || (p[digits] != ' ' && p[digits] != '\t'))
        return 0;
    unsigned fields = 0;
    while (*p != '\0' && *p != '\n' && *p != '\r') {
        p += strcspn(p, " \t\r\n");
        fields++;
        p += strspn(p, " \t");
    }
    return fields == R + 1;
}

/* The index that starts line (1-based, digits alone), checked against the
 * mode's dimension and the previous line's (*prev, 0 before the first):
 * amped-run writes them ascending, each once. *rest: the values after. */
static amp_status line_index(const char *path, uint64_t lineno, char *line,
                             const row_sink *s, uint64_t *prev, char **rest, amp_error *err)
{
    char *p = line + strspn(line, " \t"), *end;
    size_t digits = strspn(p, "0123456789");
    if (digits == 0 || (p[digits] != ' ' && p[digits] != '\t'))
        return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": expected an index (a whole "
                        "number from 1) and %u values, as the file's first line has",
                        path, lineno, s->R);
    errno = 0;
    uint64_t ix = strtoull(p, &end, 10);
    if (errno == ERANGE || ix < 1 || ix > s->dim)
        return AMP_FAIL(err, AMP_ERR_RANGE, "%s:%" PRIu64 ": index %.*s is out of range "
                        "(mode %u has indices 1 to %" PRIu64 ")", path, lineno, (int)digits,
                        p, s->mode + 1, s->dim);
    if (ix == *prev)
        return AMP_FAIL(err, AMP_ERR_DUPLICATE, "%s:%" PRIu64 ": index %" PRIu64 " repeated "
                        "(line %" PRIu64 " has it too)", path, lineno, ix, lineno - 1);
    if (ix < *prev)
        return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": index %" PRIu64 " after %" PRIu64
                        ": amped-run writes the indices in ascending order", path, lineno, ix,
                        *prev);
    *prev = ix;
    *rest = end;
    return AMP_OK;
}

/* Rows of one text matrix into s (rows: its dimension), either a row per
 * index (--rows all) or, where the first line says so (indexed_line), each
 * row after its index (--rows nonempty); s NULL: a vector of rows values,
 * one a line, into vec. */
static amp_status read_text(const char *path, uint64_t rows, const row_sink *s, double *vec,
                            amp_error *err)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: %s", path, strerror(errno));
    char *line = NULL, *rest;
    size_t cap = 0;
    uint64_t i = 0, lineno = 0, prev = 0;
    int indexed = 0;
    amp_status rc = AMP_OK;
    while (rc == AMP_OK && getline(&line, &cap, fp) != -1) {
        lineno++;
        if (lineno == 1 && s != NULL && (indexed = indexed_line(line, s->R)))
            sink_zero(s);
        if (indexed) {
            rc = line_index(path, lineno, line, s, &prev, &rest, err);
            if (rc == AMP_OK)
                rc = parse_row(path, lineno, rest, s->R, 0, sink_row(s, prev - 1), err);
            if (rc == AMP_OK)
                sink_done(s, prev - 1);
            continue;
        }
        if (i == rows) {
            rc = AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": more than %" PRIu64 " rows",
                          path, lineno, rows);
            break;
        }
        if (s == NULL) {
            rc = parse_row(path, lineno, line, 1, (unsigned)rows, vec + i, err);
        } else {
            rc = parse_row(path, lineno, line, s->R, 0, sink_row(s, i), err);
            if (rc == AMP_OK)
                sink_done(s, i);
        }
        i++;
    }
    if (rc == AMP_OK && ferror(fp))
        rc = AMP_FAIL(err, AMP_ERR_IO, "%s: %s", path, strerror(errno));
    if (rc == AMP_OK && !indexed && i < rows)
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

/* ---- .npy ------------------------------------------------------------------ */

typedef struct npy_head {
    char descr[16];           /* as the header gives it */
    int fortran;
    unsigned ndim;            /* up to 4 kept in shape, for messages */
    uint64_t shape[4];
    uint64_t count;           /* elements */
    unsigned width;           /* bytes an element */
} npy_head;

/* "(13, 3)" or "(3,)" into buf. */
static const char *npy_shape_text(const npy_head *h, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "(");
    for (unsigned d = 0; d < h->ndim && d < 4 && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%" PRIu64, d ? ", " : "", h->shape[d]);
    if (k < n)
        snprintf(buf + k, n - k, h->ndim == 1 ? ",)" : h->ndim > 4 ? ", ...)" : ")");
    return buf;
}

/* The value of key in a header's dictionary, past its colon and blanks;
 * NULL where the key is not there. numpy writes the keys quoted with ',
 * other writers may use ". */
static const char *npy_key(const char *dict, const char *key)
{
    char q[32];
    for (int quote = 0; quote < 2; quote++) {
        snprintf(q, sizeof q, quote ? "\"%s\"" : "'%s'", key);
        const char *p = strstr(dict, q);
        if (p == NULL)
            continue;
        p += strlen(q);
        p += strspn(p, " ");
        if (*p != ':')
            return NULL;
        return p + 1 + strspn(p + 1, " ");
    }
    return NULL;
}

static amp_status npy_dict(const char *path, const char *dict, npy_head *h, amp_error *err)
{
    const char *p = npy_key(dict, "descr");
    if (p == NULL || (*p != '\'' && *p != '"') || strchr(p + 1, *p) == NULL ||
        (size_t)(strchr(p + 1, *p) - p - 1) >= sizeof h->descr)
        return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: the .npy header has no data type ('descr') "
                        "that amped reads", path);
    size_t n = (size_t)(strchr(p + 1, *p) - p - 1);
    memcpy(h->descr, p + 1, n);
    h->descr[n] = '\0';
    p = npy_key(dict, "fortran_order");
    if (p == NULL || (strncmp(p, "False", 5) != 0 && strncmp(p, "True", 4) != 0))
        return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: the .npy header has no 'fortran_order' "
                        "(False or True)", path);
    h->fortran = *p == 'T';
    p = npy_key(dict, "shape");
    if (p == NULL || *p != '(')
        return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: the .npy header has no 'shape'", path);
    p++;
    h->ndim = 0;
    h->count = 1;
    for (;;) {
        p += strspn(p, " ");
        if (*p == ')')
            break;
        char *end;
        errno = 0;
        uint64_t d = strtoull(p, &end, 10);
        if (end == p || *p == '-' || errno == ERANGE)
            return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: the .npy header's shape is not a tuple "
                            "of whole numbers", path);
        if (h->ndim < 4)
            h->shape[h->ndim] = d;
        h->ndim++;
        /* a count past 2^64 is no file that exists: the size check refuses it */
        h->count = d != 0 && h->count > UINT64_MAX / d ? UINT64_MAX : h->count * d;
        p = end + strspn(end, " ");
        if (*p == ',')
            p++;
        else if (*p != ')')
            return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: the .npy header's shape is not a tuple "
                            "of whole numbers", path);
    }
    return AMP_OK;
}

/* Open path as .npy of one of the types in want ("<f8 <f4" or "<u8"), C
 * order, its header read (magic, version 1.0, 2.0 or 3.0, the dictionary)
 * and its size checked against the shape: *fpp at the first element. */
static amp_status npy_open(const char *path, const char *want, FILE **fpp, npy_head *h,
                           amp_error *err)
{
    memset(h, 0, sizeof *h);
    *fpp = NULL;
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: %s", path, strerror(errno));
    unsigned char pre[12];
    char *dict = NULL, sh[96];
    amp_status rc = AMP_OK;
    size_t got = fread(pre, 1, 10, fp);
    if (got < 8 || memcmp(pre, "\x93NUMPY", 6) != 0)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_FORMAT, "%s: not a NumPy .npy file (it does not "
                       "start with \\x93NUMPY)", path);
    if (pre[6] < 1 || pre[6] > 3 || pre[7] != 0)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_VERSION, "%s: .npy version %u.%u; amped reads "
                       "1.0, 2.0 and 3.0", path, pre[6], pre[7]);
    /* 1.0 has a 2-byte header length, 2.0 and 3.0 (UTF-8 keys) a 4-byte one */
    unsigned lenbytes = pre[6] == 1 ? 2 : 4;
    if (got < 10 || (lenbytes == 4 && fread(pre + 10, 1, 2, fp) != 2))
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_TRUNCATED, "%s: ends inside its .npy header",
                       path);
    uint64_t hlen = pre[8] | (uint64_t)pre[9] << 8;
    if (lenbytes == 4)
        hlen |= (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
    /* numpy itself refuses headers over 10000 bytes unless told otherwise */
    if (hlen > 1 << 20)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_FORMAT, "%s: a .npy header of %" PRIu64
                       " bytes; amped reads headers up to 1 MiB", path, hlen);
    dict = malloc((size_t)hlen + 1);
    if (dict == NULL)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
    if (fread(dict, 1, (size_t)hlen, fp) != (size_t)hlen)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_TRUNCATED, "%s: ends inside its .npy header",
                       path);
    dict[hlen] = '\0';
    if (strlen(dict) != hlen || dict[strspn(dict, " ")] != '{')
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_FORMAT, "%s: the .npy header is not a "
                       "dictionary", path);
    AMP_CHECK_GOTO(npy_dict(path, dict, h, err), rc, fail);
    /* want: types of 3 characters, a space between */
    int known = 0;
    for (size_t k = 0; k + 3 <= strlen(want); k += 4)
        known |= strlen(h->descr) == 3 && strncmp(want + k, h->descr, 3) == 0;
    if (!known)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_FORMAT, "%s: data type '%s'; expected %s", path,
                       h->descr, strcmp(want, "<u8") == 0 ? "'<u8' (the indices)"
                                                          : "'<f8' or '<f4'");
    h->width = (unsigned)(h->descr[2] - '0');
    if (h->fortran)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_FORMAT, "%s: in Fortran order; amped reads C "
                       "order (fortran_order False), as it writes", path);
    struct stat st;
    uint64_t start = 6 + 2 + lenbytes + hlen;
    uint64_t want_size = h->count > (UINT64_MAX - start) / h->width
                             ? UINT64_MAX : start + h->count * h->width;
    if (fstat(fileno(fp), &st) != 0)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_IO, "%s: %s", path, strerror(errno));
    char size[32] = "more than 2^64";
    if (want_size != UINT64_MAX)
        snprintf(size, sizeof size, "%" PRIu64, want_size);
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size != want_size)
        AMP_RAISE_GOTO(err, rc, fail, (uint64_t)st.st_size < want_size ? AMP_ERR_TRUNCATED
                                                                       : AMP_ERR_CORRUPT,
                       "%s: %" PRIu64 " bytes, where its header and shape %s of '%s' make %s",
                       path, (uint64_t)st.st_size, npy_shape_text(h, sh, sizeof sh), h->descr,
                       size);
    free(dict);
    *fpp = fp;
    return AMP_OK;
fail:
    free(dict);
    fclose(fp);
    return rc;
}

/* n elements of fp into x (little-endian in the file, whatever the host),
 * each a finite number; row: the first's row, for messages (a vector's
 * elements are numbered alone). */
static amp_status npy_values(FILE *fp, const char *path, const npy_head *h, uint64_t row,
                             unsigned n, double *x, amp_error *err)
{
    unsigned char b[8];
    for (unsigned k = 0; k < n; k++) {
        if (fread(b, h->width, 1, fp) != 1)
            return ferror(fp) ? AMP_FAIL(err, AMP_ERR_IO, "%s: %s", path, strerror(errno))
                              : AMP_FAIL(err, AMP_ERR_TRUNCATED, "%s: ends before its last "
                                         "element", path);
        uint64_t u = 0;
        for (unsigned j = 0; j < h->width; j++)
            u |= (uint64_t)b[j] << (8 * j);
        double v;
        if (h->width == 8) {
            memcpy(&v, &u, 8);
        } else {
            uint32_t u32 = (uint32_t)u;
            float f;
            memcpy(&f, &u32, 4);
            v = f;
        }
        /* as in text: a start of NaN or infinity gives only NaN fits */
        if (!isfinite(v))
            return h->ndim == 2
                       ? AMP_FAIL(err, AMP_ERR_PARSE, "%s: element [%" PRIu64 ", %u] is not a "
                                  "finite number", path, row, k)
                       : AMP_FAIL(err, AMP_ERR_PARSE, "%s: element [%u] is not a finite number",
                                  path, k);
        x[k] = v;
    }
    return AMP_OK;
}

/* PREFIX.modeN.index.npy: '<u8', shape (n,), 0-based indices of the mode,
 * ascending and each once as amped-run writes them; into *ix (malloc'd),
 * their number *n. */
static amp_status npy_indices(const char *path, const row_sink *s, uint64_t **ix, uint64_t *n,
                              amp_error *err)
{
    FILE *fp;
    npy_head h;
    char sh[96];
    *ix = NULL;
    AMP_CHECK(npy_open(path, "<u8", &fp, &h, err));
    amp_status rc = AMP_OK;
    uint64_t *v = NULL;
    if (h.ndim != 1)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_FORMAT, "%s: shape %s; an index file is a "
                       "vector (n,)", path, npy_shape_text(&h, sh, sizeof sh));
    /* more indices than the mode has cannot all be distinct and in range */
    if (h.shape[0] > s->dim)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_FORMAT, "%s: shape %s: more indices than mode "
                       "%u has (%" PRIu64 ")", path, npy_shape_text(&h, sh, sizeof sh),
                       s->mode + 1, s->dim);
    v = malloc((size_t)h.shape[0] * sizeof *v + 1);
    if (v == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
    for (uint64_t k = 0; k < h.shape[0]; k++) {
        unsigned char b[8];
        if (fread(b, 8, 1, fp) != 1)
            AMP_RAISE_GOTO(err, rc, done, ferror(fp) ? AMP_ERR_IO : AMP_ERR_TRUNCATED,
                           "%s: ends before its last element", path);
        uint64_t u = 0;
        for (unsigned j = 0; j < 8; j++)
            u |= (uint64_t)b[j] << (8 * j);
        if (u >= s->dim)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_RANGE, "%s: element [%" PRIu64 "] is %"
                           PRIu64 ", out of range (mode %u has indices 0 to %" PRIu64 ")",
                           path, k, u, s->mode + 1, s->dim - 1);
        if (k > 0 && u == v[k - 1])
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_DUPLICATE, "%s: element [%" PRIu64 "] is %"
                           PRIu64 ", as element [%" PRIu64 "] is", path, k, u, k - 1);
        if (k > 0 && u < v[k - 1])
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_PARSE, "%s: element [%" PRIu64 "] is %"
                           PRIu64 ", after %" PRIu64 ": amped-run writes the indices in "
                           "ascending order", path, k, u, v[k - 1]);
        v[k] = u;
    }
    *ix = v;
    *n = h.shape[0];
    v = NULL;
done:
    free(v);
    fclose(fp);
    return rc;
}

/* A factor from PREFIX.modeN.npy: shape (dim, R), or with ix (nonempty
 * rows) (n, R), row k for index ix[k]. */
static amp_status read_npy(const char *path, const row_sink *s, const uint64_t *ix, uint64_t n,
                           amp_error *err)
{
    FILE *fp;
    npy_head h;
    char sh[96];
    AMP_CHECK(npy_open(path, "<f8 <f4", &fp, &h, err));
    amp_status rc = AMP_OK;
    uint64_t rows = ix ? n : s->dim;
    if (h.ndim != 2 || h.shape[0] != rows || h.shape[1] != s->R) {
        if (ix)
            rc = AMP_FAIL(err, AMP_ERR_FORMAT, "%s: shape %s, expected (%" PRIu64 ", %u): the "
                          "rows of its index file, rank %u", path,
                          npy_shape_text(&h, sh, sizeof sh), rows, s->R, s->R);
        else
            rc = AMP_FAIL(err, AMP_ERR_FORMAT, "%s: shape %s, expected (%" PRIu64 ", %u): "
                          "mode %u's indices, rank %u", path, npy_shape_text(&h, sh, sizeof sh),
                          rows, s->R, s->mode + 1, s->R);
    }
    if (rc == AMP_OK && ix)
        sink_zero(s);
    for (uint64_t k = 0; rc == AMP_OK && k < rows; k++) {
        uint64_t i = ix ? ix[k] : k;
        rc = npy_values(fp, path, &h, k, s->R, sink_row(s, i), err);
        if (rc == AMP_OK)
            sink_done(s, i);
    }
    fclose(fp);
    return rc;
}

/* PREFIX.lambda.npy: shape (R,). */
static amp_status read_npy_lambda(const char *path, unsigned R, double *lambda, amp_error *err)
{
    FILE *fp;
    npy_head h;
    char sh[96];
    AMP_CHECK(npy_open(path, "<f8 <f4", &fp, &h, err));
    amp_status rc = AMP_OK;
    if (h.ndim != 1 || h.shape[0] != R)
        rc = AMP_FAIL(err, AMP_ERR_FORMAT, "%s: shape %s, expected (%u,): the rank", path,
                      npy_shape_text(&h, sh, sizeof sh), R);
    if (rc == AMP_OK)
        rc = npy_values(fp, path, &h, 0, R, lambda, err);
    fclose(fp);
    return rc;
}

/* ---- ktensor ------------------------------------------------------------- */

typedef struct line_reader {
    FILE *fp;
    const char *path;
    char *line;
    size_t cap;
    uint64_t lineno;
} line_reader;

/* The next line into lr->line; what: what it should hold, for the message
 * of a file that ends before it. */
static amp_status next_line(line_reader *lr, const char *what, amp_error *err)
{
    errno = 0;
    if (getline(&lr->line, &lr->cap, lr->fp) == -1)
        return ferror(lr->fp) ? AMP_FAIL(err, AMP_ERR_IO, "%s: %s", lr->path, strerror(errno))
                              : AMP_FAIL(err, AMP_ERR_TRUNCATED, "%s: ends after line %" PRIu64
                                         ", before %s", lr->path, lr->lineno, what);
    lr->lineno++;
    return AMP_OK;
}

/* The line holds exactly n whole numbers (what names them) into v. */
static amp_status line_counts(line_reader *lr, unsigned n, uint64_t *v, const char *what,
                              amp_error *err)
{
    char *p = lr->line;
    for (unsigned k = 0; k <= n; k++) {
        p += strspn(p, " \t\r\n");
        if (k == n && *p == '\0')
            return AMP_OK;
        char *end;
        errno = 0;
        if (k < n && *p >= '0' && *p <= '9')
            v[k] = strtoull(p, &end, 10);
        if (k == n || *p < '0' || *p > '9' || errno == ERANGE ||
            (*end != '\0' && strchr(" \t\r\n", *end) == NULL))
            return AMP_FAIL(err, AMP_ERR_PARSE, "%s:%" PRIu64 ": expected %s", lr->path,
                            lr->lineno, what);
        p = end;
    }
    return AMP_OK;
}

/* The line is word, give or take blanks around it. */
static int line_is(const line_reader *lr, const char *word)
{
    const char *p = lr->line + strspn(lr->line, " \t");
    size_t n = strlen(word);
    return strncmp(p, word, n) == 0 && p[n + strspn(p + n, " \t\r\n")] == '\0';
}

/* Per-mode state of amp_factors_read: the row map and the dropped rows'
 * Gram (only a mode with dropped slices has rows for it). */
static amp_status sink_open(const amp_tensor *t, amp_cpd *c, unsigned m, double *scratch,
                            row_sink *s, amp_error *err)
{
    memset(s, 0, sizeof *s);
    s->R = c->rank;
    s->mode = m;
    s->dim = t->dims[m];
    s->rows = t->rows[m];
    s->A = c->A[m];
    s->scratch = scratch;
    s->inv = inverse_relabel(t, m, err);
    if (s->inv == NULL)
        return err ? err->status : AMP_ERR_NOMEM;
    if (t->rows[m] < t->dims[m]) {
        s->G = calloc((size_t)c->rank * c->rank, sizeof *s->G);
        if (s->G == NULL) {
            amp_huge_free(s->inv, (size_t)t->dims[m] * sizeof(uint64_t) + 1);
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        }
    }
    return AMP_OK;
}

/* Done with s: its Gram kept as the mode's start_gram where the mode was
 * read (ok), else freed. */
static void sink_close(amp_cpd *c, row_sink *s, int ok)
{
    if (ok && s->G != NULL)
        keep_start_gram(c, s->mode, s->G);
    else
        free(s->G);
    amp_huge_free(s->inv, (size_t)s->dim * sizeof(uint64_t) + 1);
    s->G = NULL;
    s->inv = NULL;
}

/* PREFIX.ktn as write_ktensor and pyttb's export_data write it: each
 * count checked against the tensor and the rank, the weights into lambda,
 * every row of each mode (a ktensor has no --rows nonempty). */
static amp_status read_ktensor(const amp_tensor *t, const char *path, amp_cpd *c,
                               double *scratch, amp_error *err)
{
    const unsigned N = t->nmodes, R = c->rank;
    line_reader lr = {.path = path};
    lr.fp = fopen(path, "r");
    if (lr.fp == NULL)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: %s", path, strerror(errno));
    amp_status rc = AMP_OK;
    uint64_t v[AMP_MAX_MODES], nm;
    char what[64];
    AMP_CHECK_GOTO(next_line(&lr, "'ktensor'", err), rc, done);
    if (!line_is(&lr, "ktensor"))
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_FORMAT, "%s:1: expected 'ktensor': not a "
                       "ktensor file", path);
    AMP_CHECK_GOTO(next_line(&lr, "the number of modes", err), rc, done);
    AMP_CHECK_GOTO(line_counts(&lr, 1, &nm, "the number of modes", err), rc, done);
    if (nm != N)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_FORMAT, "%s:2: a ktensor of %" PRIu64 " modes; "
                       "the tensor has %u", path, nm, N);
    snprintf(what, sizeof what, "the %u dimensions", N);
    AMP_CHECK_GOTO(next_line(&lr, what, err), rc, done);
    AMP_CHECK_GOTO(line_counts(&lr, N, v, what, err), rc, done);
    for (unsigned m = 0; m < N; m++)
        if (v[m] != t->dims[m])
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_FORMAT, "%s:3: mode %u has %" PRIu64
                           " indices in the ktensor, %" PRIu64 " in the tensor", path, m + 1,
                           v[m], t->dims[m]);
    AMP_CHECK_GOTO(next_line(&lr, "the rank", err), rc, done);
    AMP_CHECK_GOTO(line_counts(&lr, 1, v, "the rank", err), rc, done);
    if (v[0] != R)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_FORMAT, "%s:4: a ktensor of rank %" PRIu64
                       "; the run's rank is %u (-r)", path, v[0], R);
    AMP_CHECK_GOTO(next_line(&lr, "the weights", err), rc, done);
    AMP_CHECK_GOTO(parse_row(path, lr.lineno, lr.line, R, 0, c->lambda, err), rc, done);
    for (unsigned m = 0; m < N; m++) {
        snprintf(what, sizeof what, "mode %u's 'matrix'", m + 1);
        AMP_CHECK_GOTO(next_line(&lr, what, err), rc, done);
        if (!line_is(&lr, "matrix"))
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_FORMAT, "%s:%" PRIu64 ": expected %s", path,
                           lr.lineno, what);
        snprintf(what, sizeof what, "2 (mode %u's matrix has 2 dimensions)", m + 1);
        AMP_CHECK_GOTO(next_line(&lr, what, err), rc, done);
        AMP_CHECK_GOTO(line_counts(&lr, 1, v, what, err), rc, done);
        if (v[0] != 2)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_FORMAT, "%s:%" PRIu64 ": expected %s", path,
                           lr.lineno, what);
        snprintf(what, sizeof what, "mode %u's rows and columns", m + 1);
        AMP_CHECK_GOTO(next_line(&lr, what, err), rc, done);
        AMP_CHECK_GOTO(line_counts(&lr, 2, v, what, err), rc, done);
        if (v[0] != t->dims[m] || v[1] != R)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_FORMAT, "%s:%" PRIu64 ": mode %u's matrix is "
                           "%" PRIu64 " x %" PRIu64 ", expected %" PRIu64 " x %u", path,
                           lr.lineno, m + 1, v[0], v[1], t->dims[m], R);
        row_sink s;
        AMP_CHECK_GOTO(sink_open(t, c, m, scratch, &s, err), rc, done);
        snprintf(what, sizeof what, "mode %u's %" PRIu64 " rows", m + 1, t->dims[m]);
        for (uint64_t i = 0; rc == AMP_OK && i < t->dims[m]; i++) {
            rc = next_line(&lr, what, err);
            if (rc == AMP_OK)
                rc = parse_row(path, lr.lineno, lr.line, R, 0, sink_row(&s, i), err);
            if (rc == AMP_OK)
                sink_done(&s, i);
        }
        sink_close(c, &s, rc == AMP_OK);
        if (rc != AMP_OK)
            goto done;
    }
    /* blank lines after the last row are no more data */
    while (getline(&lr.line, &lr.cap, lr.fp) != -1) {
        lr.lineno++;
        if (lr.line[strspn(lr.line, " \t\r\n")] != '\0')
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_PARSE, "%s:%" PRIu64 ": more after the last "
                           "of the %u factors", path, lr.lineno, N);
    }
    if (ferror(lr.fp))
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_IO, "%s: %s", path, strerror(errno));
done:
    free(lr.line);
    fclose(lr.fp);
    return rc;
}

/* ---- which set a prefix names ---------------------------------------------- */

/* Whether a file of the set -o PREFIX --format f writes exists (the
 * manifest aside: it serves text and npy alike), or with man, whether man
 * lists one. -1: out of memory. */
static int set_there(const char *prefix, unsigned N, amp_factor_format f, const manifest *man)
{
    int found = 0, more = 1;
    for (unsigned k = 0; more && !found; k++) {
        char *name = amp_factors_file_name(prefix, N, f, AMP_ROWS_NONEMPTY, k, &more);
        if (name == NULL)
            return more ? -1 : found;
        size_t n = strlen(name);
        if (n < 9 || strcmp(name + n - 9, ".manifest") != 0) {
            if (man == NULL)
                found = access(name, F_OK) == 0;
            for (size_t i = 0; man != NULL && i < man->n && !found; i++)
                found = strcmp(man->files[i].name, base_of(name)) == 0;
        }
        free(name);
    }
    return found;
}

/* The form to read: the only one there, or where there are several, the
 * one the manifest lists (it names the run's files; a ktensor has none). */
static amp_status find_form(const char *prefix, unsigned N, const manifest *man,
                            amp_factor_format *format, amp_error *err)
{
    static const amp_factor_format forms[] = {AMP_FACTORS_TEXT, AMP_FACTORS_NPY,
                                              AMP_FACTORS_KTENSOR};
    int there[3], count = 0;
    char names[160] = "";
    for (int f = 0; f < 3; f++) {
        there[f] = set_there(prefix, N, forms[f], NULL);
        if (there[f] < 0)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        if (there[f]) {
            *format = forms[f];
            count++;
        }
    }
    if (count == 0)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: no starting factors: none of %s.mode1.mat, "
                        "%s.mode1.npy and %s.ktn exists", prefix, prefix, prefix, prefix);
    if (count == 1)
        return AMP_OK;
    for (int f = 0; f < 2 && man->path != NULL; f++) {
        int listed = set_there(prefix, N, forms[f], man);
        if (listed < 0)
            return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        if (listed && there[f]) {
            *format = forms[f];
            return AMP_OK;
        }
    }
    for (int f = 0, k = 0; f < 3; f++)
        if (there[f])
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k++ ? ", " :
                     "", f == 0 ? "text" : f == 1 ? "npy" : "ktensor");
    return AMP_FAIL(err, AMP_ERR_FORMAT, "%s: factor files of more than one form (%s) and "
                    "no manifest that lists one set: move the others away, or give each set "
                    "its own prefix", prefix, names);
}

amp_status amp_factors_find(const char *prefix, unsigned nmodes, amp_factor_format *format,
                            amp_error *err)
{
    manifest man;
    AMP_CHECK(read_manifest(prefix, &man, err));
    amp_status rc = find_form(prefix, nmodes, &man, format, err);
    manifest_free(&man);
    return rc;
}

/* ALS solves for mode 1 first from the others: lambda goes into the last
 * mode's columns, where it still counts, its dropped rows' Gram included. */
static void fold_lambda(const amp_tensor *t, amp_cpd *c)
{
    const unsigned L = t->nmodes - 1, R = c->rank;
    for (uint64_t i = 0; i < c->rows[L]; i++)
        for (unsigned r = 0; r < R; r++)
            c->A[L][i * R + r] *= c->lambda[r];
    double *G = c->start_gram[L];
    for (unsigned p = 0; G != NULL && p < R; p++)
        for (unsigned q = 0; q < R; q++)
            G[p * R + q] *= c->lambda[p] * c->lambda[q];
    for (unsigned r = 0; r < R; r++)
        c->lambda[r] = 1;
}

/* Text or npy: each mode's file (npy: and its index file, where the set
 * has one), then lambda where there is one. */
static amp_status read_set(const amp_tensor *t, const char *prefix, const manifest *man,
                           int npy, amp_cpd *c, double *scratch, amp_error *err)
{
    amp_status rc = AMP_OK;
    for (unsigned m = 0; m < t->nmodes && rc == AMP_OK; m++) {
        char *name = file_name(prefix, NULL, m, npy);
        char *iname = npy ? index_name(prefix, m) : NULL;
        uint64_t *ix = NULL, n = 0;
        row_sink s;
        if (name == NULL || (npy && iname == NULL)) {
            rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        } else if ((rc = sink_open(t, c, m, scratch, &s, err)) == AMP_OK) {
            /* a set with a manifest has index files where it lists them;
             * one beside it that it does not list is an earlier run's */
            int indexed = npy && (man->path ? set_member(man, iname)
                                            : access(iname, F_OK) == 0);
            rc = check_member(man, name, err);
            if (rc == AMP_OK && indexed && (rc = check_member(man, iname, err)) == AMP_OK)
                rc = npy_indices(iname, &s, &ix, &n, err);
            if (rc == AMP_OK)
                rc = npy ? read_npy(name, &s, ix, n, err) : read_text(name, s.dim, &s, NULL, err);
            sink_close(c, &s, rc == AMP_OK);
        }
        free(ix);
        free(iname);
        free(name);
    }
    char *lname = rc == AMP_OK ? file_name(prefix, "lambda", 0, npy) : NULL;
    if (rc == AMP_OK && lname == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    if (rc == AMP_OK && access(lname, F_OK) != 0) {
        /* listed, yet missing: the run's lambda is lost */
        if (man->path != NULL && set_member(man, lname))
            rc = AMP_FAIL(err, AMP_ERR_IO, "%s: missing, though %s lists it", lname, man->path);
    } else if (rc == AMP_OK) {
        rc = check_member(man, lname, err);
        if (rc == AMP_OK)
            rc = npy ? read_npy_lambda(lname, c->rank, c->lambda, err)
                     : read_text(lname, c->rank, NULL, c->lambda, err);
    }
    free(lname);
    return rc;
}

amp_status amp_factors_read(const amp_tensor *t, const char *prefix, unsigned rank,
                            amp_cpd *c, amp_error *err)
{
    /* Random factors first: the allocation, and a defined value for any
     * row the files leave out (none, once they parse). */
    AMP_CHECK(amp_cpd_init_random(t, rank, 0, c, err));
    manifest man;
    amp_factor_format format = AMP_FACTORS_TEXT;
    amp_status rc = read_manifest(prefix, &man, err);
    double *scratch = malloc((size_t)rank * sizeof *scratch);
    if (rc == AMP_OK && scratch == NULL)
        rc = AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    if (rc == AMP_OK)
        rc = find_form(prefix, t->nmodes, &man, &format, err);
    if (rc == AMP_OK && format == AMP_FACTORS_KTENSOR) {
        char *kname = file_name(prefix, "ktn", 0, 0);
        rc = kname ? read_ktensor(t, kname, c, scratch, err)
                   : AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
        free(kname);
    } else if (rc == AMP_OK) {
        rc = read_set(t, prefix, &man, format == AMP_FACTORS_NPY, c, scratch, err);
    }
    if (rc == AMP_OK)
        fold_lambda(t, c);
    free(scratch);
    manifest_free(&man);
    if (rc != AMP_OK)
        amp_cpd_free(c);
    return rc;
}
