/* The .amp corpus through the library: every tests/files/amp-*.amp file
 * (written by tests/files/gen-amp.py) is opened and verified with
 * amp_file_open and amp_file_verify, and each defect must be found with its
 * exact status in its exact phase: at open (header, trailer, directory,
 * META, MODE) or only by verification (chunk and relabelling contents).
 * Good files are also read chunk by chunk with amp_section_read and
 * amp_chunk_check, and their relabellings with amp_file_read_relabel into
 * buffers of exactly compact_dims entries (a guard word after each must
 * survive). The message must hold line 2 of the file's NAME.expect sidecar,
 * the text amped-run --verify prints. The corpus folder is
 * $top_srcdir/tests/files (top_srcdir defaults to "."). */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amped_format.h"
#include "tap.h"

enum phase { GOOD, AT_OPEN, AT_VERIFY };

static const struct amp_case {
    const char *name;
    amp_status status;      /* AMP_OK for good files */
    enum phase phase;
} cases[] = {
    /* good: written by gen-amp.py, and by amped-prep */
    {"amp-good-3mode.amp", AMP_OK, GOOD},
    {"amp-good-4mode-key.amp", AMP_OK, GOOD},
    {"amp-good-optional-section.amp", AMP_OK, GOOD},
    {"amp-good-entry-72.amp", AMP_OK, GOOD},
    {"amp-good-prep-basic.amp", AMP_OK, GOOD},
    {"amp-good-prep-2mode-f64-stored.amp", AMP_OK, GOOD},
    {"amp-good-prep-hypersparse.amp", AMP_OK, GOOD},
    {"amp-good-prep-narrow.amp", AMP_OK, GOOD},
    {"amp-good-prep-dup.amp", AMP_OK, GOOD},
    {"amp-good-fiber.amp", AMP_OK, GOOD},
    /* fibers (format 1.1) */
    {"amp-bad-fiber-middle.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-fiber-twice.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-fiber-count.amp", AMP_ERR_CORRUPT, AT_VERIFY},
    /* the wrong file, or damaged in transit */
    {"amp-bad-empty.amp", AMP_ERR_TRUNCATED, AT_OPEN},
    {"amp-bad-magic.amp", AMP_ERR_FORMAT, AT_OPEN},
    {"amp-bad-tns-text.amp", AMP_ERR_FORMAT, AT_OPEN},
    {"amp-bad-crlf-to-lf.amp", AMP_ERR_FORMAT, AT_OPEN},
    {"amp-bad-lf-to-crlf.amp", AMP_ERR_FORMAT, AT_OPEN},
    {"amp-bad-7bit.amp", AMP_ERR_FORMAT, AT_OPEN},
    /* truncated at each boundary, or too long */
    {"amp-bad-trunc-in-header.amp", AMP_ERR_TRUNCATED, AT_OPEN},
    {"amp-bad-trunc-after-header.amp", AMP_ERR_TRUNCATED, AT_OPEN},
    {"amp-bad-trunc-in-chunk.amp", AMP_ERR_TRUNCATED, AT_OPEN},
    {"amp-bad-trunc-after-chunk.amp", AMP_ERR_TRUNCATED, AT_OPEN},
    {"amp-bad-trunc-before-dir.amp", AMP_ERR_TRUNCATED, AT_OPEN},
    {"amp-bad-trunc-in-dir.amp", AMP_ERR_TRUNCATED, AT_OPEN},
    {"amp-bad-trunc-before-trailer.amp", AMP_ERR_TRUNCATED, AT_OPEN},
    {"amp-bad-trunc-in-trailer.amp", AMP_ERR_TRUNCATED, AT_OPEN},
    {"amp-bad-trailing-bytes.amp", AMP_ERR_CORRUPT, AT_OPEN},
    /* header */
    {"amp-bad-version-2.0.amp", AMP_ERR_VERSION, AT_OPEN},
    {"amp-bad-version-bitflip.amp", AMP_ERR_VERSION, AT_OPEN},
    {"amp-bad-header-bitflip.amp", AMP_ERR_CHECKSUM, AT_OPEN},
    {"amp-bad-header-flags.amp", AMP_ERR_UNSUPPORTED, AT_OPEN},
    {"amp-bad-dir-past-end.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-dir-wrap.amp", AMP_ERR_CORRUPT, AT_OPEN},
    /* trailer and directory */
    {"amp-bad-trailer.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-dir-bitflip.amp", AMP_ERR_CHECKSUM, AT_OPEN},
    {"amp-bad-chunk-hash-bitflip.amp", AMP_ERR_CHECKSUM, AT_OPEN},
    {"amp-bad-dir-magic.amp", AMP_ERR_CORRUPT, AT_OPEN},
    /* directory entries, all checksums valid */
    {"amp-bad-required-section.amp", AMP_ERR_UNSUPPORTED, AT_OPEN},
    {"amp-bad-overlap.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-outside.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-dup-chunk.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-missing-chunk.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-no-relabel.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-relabel-size.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-optional-raw-size.amp", AMP_ERR_CORRUPT, AT_OPEN},
    /* layouts */
    {"amp-bad-shards-short.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-shard-gap.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-stored-mode-bitflip.amp", AMP_ERR_CHECKSUM, AT_OPEN},
    /* chunk and relabelling contents: found only by verification */
    {"amp-bad-chunk-bitflip.amp", AMP_ERR_CHECKSUM, AT_VERIFY},
    {"amp-bad-stored-chunk-bitflip.amp", AMP_ERR_CHECKSUM, AT_VERIFY},
    {"amp-bad-chunk-index.amp", AMP_ERR_CORRUPT, AT_VERIFY},
    {"amp-bad-chunk-highbits.amp", AMP_ERR_CORRUPT, AT_VERIFY},
    {"amp-bad-chunk-order.amp", AMP_ERR_CORRUPT, AT_VERIFY},
    {"amp-bad-chunk-across.amp", AMP_ERR_CORRUPT, AT_VERIFY},
    {"amp-bad-chunk-nan.amp", AMP_ERR_CORRUPT, AT_VERIFY},
    {"amp-bad-chunk-zstd.amp", AMP_ERR_CORRUPT, AT_VERIFY},
    {"amp-bad-chunk-short.amp", AMP_ERR_CORRUPT, AT_VERIFY},
    {"amp-bad-relabel-dup.amp", AMP_ERR_CORRUPT, AT_VERIFY},
    {"amp-bad-relabel-range.amp", AMP_ERR_CORRUPT, AT_VERIFY},
    /* Issue 40: each field the spec requires zero or in a range, alone. */
    {"amp-bad-header-reserved.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-dir-reserved.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-entry-size-68.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-entry-flags.amp", AMP_ERR_UNSUPPORTED, AT_OPEN},
    {"amp-bad-planar-meta.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-mode.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-shard.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-seq.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-count.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-aux.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-entry-mode.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-entry-shard.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-entry-seq.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-entry-count.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-entry-aux.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-relabel-entry-shard.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-relabel-entry-seq.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-relabel-entry-aux.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-chunk-count-0.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-chunk-count-5.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-value-type.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-value-type-0.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-nnz-0.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-norm-negative.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-norm-nan.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-dim-0.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-dim-huge.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-compact-0.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-compact-dims.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-meta-compact-nnz.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-mode.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-encoding.amp", AMP_ERR_UNSUPPORTED, AT_OPEN},
    {"amp-bad-mode-nmodes.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-nshards-0.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-chunk-nnz-0.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-chunk-nnz-over.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-field-reserved.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-shard-reserved.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-field-width.amp", AMP_ERR_CORRUPT, AT_OPEN},
    {"amp-bad-mode-field-shift.amp", AMP_ERR_CORRUPT, AT_OPEN},
};
#define NCASES (sizeof cases / sizeof cases[0])

static const char *status_name(amp_status st)
{
    static const char *const names[] = {
        "AMP_OK", "AMP_ERR_USAGE", "AMP_ERR_NOMEM", "AMP_ERR_IO", "AMP_ERR_PARSE",
        "AMP_ERR_RANGE", "AMP_ERR_FORMAT", "AMP_ERR_CORRUPT", "AMP_ERR_CHECKSUM",
        "AMP_ERR_VERSION", "AMP_ERR_DUPLICATE", "AMP_ERR_EMPTY", "AMP_ERR_CUDA",
        "AMP_ERR_NO_DEVICE", "AMP_ERR_UNSUPPORTED", "AMP_ERR_INTERNAL", "AMP_ERR_TRUNCATED"};
    return (unsigned)st < sizeof names / sizeof names[0] ? names[st] : "(unknown status)";
}

#define is_status(got, want, ...)                                                       \
    do {                                                                                \
        amp_status g_ = (got), w_ = (want);                                             \
        if (!ok(g_ == w_, __VA_ARGS__))                                                 \
            diag("  got %s, expected %s", status_name(g_), status_name(w_));            \
    } while (0)

static char corpus[4096];

/* Line 2 of NAME.expect (the message amped-run must print), and line 1
 * (its exit status) into *exit_status; NULL when there is no sidecar. */
static char *expect_text(const char *name, int *exit_status)
{
    char path[8192], line1[64];
    static char line2[2048];
    snprintf(path, sizeof path, "%s/%s.expect", corpus, name);
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return NULL;
    int got = fgets(line1, sizeof line1, fp) != NULL && fgets(line2, sizeof line2, fp) != NULL;
    fclose(fp);
    if (!got)
        return NULL;
    line2[strcspn(line2, "\n")] = '\0';
    *exit_status = atoi(line1);
    return line2;
}

/* What the library did with one file. The calls run in a child process,
 * which sends this back after each step, so that a file that crashes the
 * library fails its own tests (naming the step) and not the whole run. */
enum step { STEP_OPEN, STEP_VERIFY, STEP_CHUNKS, STEP_RELABELS, STEP_CLOSE, STEP_DONE };
static const char *const step_names[] = {"amp_file_open", "amp_file_verify",
                                         "reading the chunks", "amp_file_read_relabel",
                                         "amp_file_close", "the end"};

typedef struct probe {
    enum step step;                 /* the step under way */
    amp_status open_rc;
    int handle_on_failure;          /* amp_file_open failed yet set *f */
    char open_msg[AMP_ERROR_MSG_MAX];
    size_t nsections;
    amp_status verify_rc;
    size_t nbad;
    char verify_msg[AMP_ERROR_MSG_MAX];
    size_t chunks_listed, chunks_read, chunks_bad;
    int counts_ok;
    char chunk_msg[AMP_ERROR_MSG_MAX];
    int relabel_overrun, relabel_failed;
    char relabel_msg[AMP_ERROR_MSG_MAX];
} probe;

static void send_probe(int fd, probe *p, enum step step)
{
    p->step = step;
    const char *b = (const char *)p;
    size_t n = sizeof *p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(99);
        b += w;
        n -= (size_t)w;
    }
}

/* Every chunk of every shard, read and checked one by one: the way a
 * consumer reads a file it has opened. Counts nonzeros per shard and mode. */
static void read_all_chunks(const amp_file *f, probe *p)
{
    const amp_meta *m = amp_file_meta(f);
    const amp_file_info *in = amp_file_info_get(f);
    amp_section_reader *r = NULL;
    amp_error err = {0};
    p->counts_ok = 1;
    for (size_t i = 0; i < in->nsections; i++)
        p->chunks_listed += amp_file_section(f, i)->type == AMP_SECTION_CHUNK;
    if (amp_section_reader_new(f, &r, &err) != AMP_OK) {
        p->chunks_bad++;
        snprintf(p->chunk_msg, sizeof p->chunk_msg, "%s", err.msg);
        return;
    }
    for (unsigned d = 0; d < m->nmodes; d++) {
        const amp_mode_layout *l = amp_file_mode(f, d);
        uint64_t nnz = 0;
        for (uint32_t s = 0; s < l->nshards; s++) {
            uint64_t shard_nnz = 0;
            for (uint32_t c = 0; c < l->shards[s].nchunks; c++) {
                const amp_section *sec = amp_file_chunk(f, d, s, c);
                if (sec == NULL || sec->type != AMP_SECTION_CHUNK || sec->mode != d ||
                    sec->shard != s || sec->seq != c) {
                    if (p->chunks_bad++ == 0)
                        snprintf(p->chunk_msg, sizeof p->chunk_msg,
                                 "amp_file_chunk(mode %u, shard %u, chunk %u) is wrong",
                                 d + 1, s, c);
                    continue;
                }
                /* 16 guard bytes: a read must not write past raw_size. */
                unsigned char *raw = malloc((size_t)sec->raw_size + 16);
                if (raw == NULL) {
                    p->chunks_bad++;
                    continue;
                }
                memset(raw, 0xA5, (size_t)sec->raw_size + 16);
                amp_error_clear(&err);
                amp_status rc = amp_section_read(r, sec, raw, (size_t)sec->raw_size, &err);
                if (rc == AMP_OK)
                    rc = amp_chunk_check(f, sec, raw, &err);
                for (int k = 0; k < 16 && rc == AMP_OK; k++)
                    if (raw[sec->raw_size + k] != 0xA5)
                        rc = AMP_FAIL(&err, AMP_ERR_INTERNAL, "mode %u shard %u chunk %u: "
                                      "amp_section_read wrote past its raw size", d + 1, s, c);
                if (rc != AMP_OK && p->chunks_bad++ == 0)
                    snprintf(p->chunk_msg, sizeof p->chunk_msg, "%s", err.msg);
                free(raw);
                p->chunks_read++;
                shard_nnz += sec->count;
            }
            p->counts_ok &= shard_nnz == l->shards[s].nnz;
            nnz += shard_nnz;
        }
        p->counts_ok &= nnz == m->nnz;
    }
    amp_section_reader_free(r);
}

/* Each mode's relabelling read into exactly compact_dims entries: the word
 * after them must stay untouched whatever the section holds. */
static void read_relabels(const amp_file *f, probe *p)
{
    const amp_meta *m = amp_file_meta(f);
    const uint64_t guard = UINT64_C(0x5AFE5AFE5AFE5AFE);
    for (unsigned d = 0; d < m->nmodes; d++) {
        uint64_t n = m->compact_dims[d];
        uint64_t *map = malloc((size_t)(n + 1) * sizeof *map);
        if (map == NULL) {
            p->relabel_failed++;
            continue;
        }
        map[n] = guard;
        amp_error err = {0};
        if (amp_file_read_relabel(f, d, map, &err) != AMP_OK && p->relabel_failed++ == 0)
            snprintf(p->relabel_msg, sizeof p->relabel_msg, "%s", err.msg);
        if (map[n] != guard && p->relabel_overrun++ == 0)
            snprintf(p->relabel_msg, sizeof p->relabel_msg, "mode %u: amp_file_read_relabel "
                     "wrote past the %" PRIu64 " entries of compact_dims", d + 1, n);
        free(map);
    }
}

static void probe_file(const char *path, enum phase phase, int fd)
{
    probe p;
    memset(&p, 0, sizeof p);
    send_probe(fd, &p, STEP_OPEN);
    amp_file *f = (amp_file *)&p;       /* not NULL: amp_file_open must reset it */
    amp_error err = {0};
    p.open_rc = amp_file_open(path, &f, &err);
    if (p.open_rc != AMP_OK) {
        p.handle_on_failure = f != NULL;
        snprintf(p.open_msg, sizeof p.open_msg, "%s", err.msg);
        send_probe(fd, &p, STEP_DONE);
        return;
    }
    p.nsections = amp_file_info_get(f)->nsections;
    send_probe(fd, &p, STEP_VERIFY);
    amp_error verr = {0};
    p.verify_rc = amp_file_verify(f, 2, NULL, NULL, &p.nbad, &verr);
    snprintf(p.verify_msg, sizeof p.verify_msg, "%s", verr.msg);
    if (phase == GOOD) {
        send_probe(fd, &p, STEP_CHUNKS);
        read_all_chunks(f, &p);
    }
    send_probe(fd, &p, STEP_RELABELS);
    read_relabels(f, &p);
    send_probe(fd, &p, STEP_CLOSE);
    amp_file_close(f);
    send_probe(fd, &p, STEP_DONE);
}

/* Run probe_file in a child; 0 and *p when it finished, else the signal or
 * exit status it ended with, *p then holding the step where it stopped. */
static int probe_in_child(const char *path, enum phase phase, probe *p)
{
    int fds[2];
    memset(p, 0, sizeof *p);
    fflush(stdout);
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(99);
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(99);
    }
    if (pid == 0) {
        close(fds[0]);
        alarm(120);     /* a hang ends as SIGALRM */
        probe_file(path, phase, fds[1]);
        close(fds[1]);
        _exit(0);
    }
    close(fds[1]);
    probe last, cur;
    size_t have = 0, nread = 0;
    memset(&last, 0, sizeof last);
    for (;;) {
        ssize_t r = read(fds[0], (char *)&cur + have, sizeof cur - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
        if (have == sizeof cur) {
            last = cur;
            have = 0;
            nread++;
        }
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            perror("waitpid");
            exit(99);
        }
    *p = last;
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    if (WEXITSTATUS(status) != 0 || nread == 0 || last.step != STEP_DONE)
        return WEXITSTATUS(status) ? WEXITSTATUS(status) : 1;
    return 0;
}

static void run_case(const struct amp_case *c)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", corpus, c->name);
    int exit_status = -1;
    const char *text = expect_text(c->name, &exit_status);
    if (!ok(text != NULL && exit_status == (c->phase == GOOD ? 0 : 1),
            "%s: %s.expect agrees (exit status %d)", c->name, c->name,
            c->phase == GOOD ? 0 : 1))
        text = NULL;

    probe p;
    int died = probe_in_child(path, c->phase, &p);
    if (!ok(died == 0, "%s: the library neither crashes nor hangs on it", c->name)) {
        if (died > 128)
            diag("  killed by signal %d during %s", died - 128, step_names[p.step]);
        else
            diag("  the child stopped (status %d) during %s", died, step_names[p.step]);
        return;
    }
    if (c->phase == AT_OPEN) {
        is_status(p.open_rc, c->status, "%s: amp_file_open fails with %s", c->name,
                  status_name(c->status));
        if (p.open_rc != AMP_OK) {
            ok(!p.handle_on_failure, "%s: no file handle on failure", c->name);
            if (text != NULL)
                like(p.open_msg, text, "%s: the message names the fault", c->name);
            return;
        }
        /* Accepted although it should not be: say how far it gets. */
        diag("  accepted by amp_file_open; amp_file_verify: %s%s%s", status_name(p.verify_rc),
             p.verify_rc ? ": " : "", p.verify_rc ? p.verify_msg : "");
        if (!ok(p.relabel_overrun == 0, "%s: relabellings read within compact_dims entries",
                c->name))
            diag("  %s", p.relabel_msg);
        return;
    }

    is_status(p.open_rc, AMP_OK, "%s: amp_file_open succeeds", c->name);
    if (p.open_rc != AMP_OK) {
        diag("  %s", p.open_msg);
        return;
    }
    if (c->phase == GOOD) {
        is_status(p.verify_rc, AMP_OK, "%s: amp_file_verify passes", c->name);
        if (p.verify_rc != AMP_OK)
            diag("  %s", p.verify_msg);
        /* Always one check: a .expect that stopped saying "all N" would
         * otherwise drop it unseen. */
        size_t want = 0;
        const char *all = text ? strstr(text, "all ") : NULL;
        int given = all != NULL && sscanf(all, "all %zu", &want) == 1;
        if (!given)
            diag("  %s.expect does not give the sections ('all N sections')", c->name);
        ok(given && p.nsections == want, "%s: %zu sections, as its .expect says (%zu)", c->name,
           p.nsections, want);
        if (!ok(p.chunks_bad == 0 && p.chunks_read == p.chunks_listed && p.counts_ok,
                "%s: all %zu chunks read with amp_section_read and pass amp_chunk_check",
                c->name, p.chunks_listed))
            diag("  %zu bad, %zu read of %zu listed, nonzero counts %s; %s", p.chunks_bad,
                 p.chunks_read, p.chunks_listed, p.counts_ok ? "agree" : "disagree",
                 p.chunk_msg);
        if (!ok(p.relabel_overrun == 0 && p.relabel_failed == 0,
                "%s: relabellings read (one-to-one, within compact_dims entries)", c->name))
            diag("  %s", p.relabel_msg);
        return;
    }
    is_status(p.verify_rc, c->status, "%s: amp_file_verify fails with %s", c->name,
              status_name(c->status));
    if (p.verify_rc != AMP_OK) {
        is_int(p.nbad, 1, "%s: one section is found bad", c->name);
        if (text != NULL)
            like(p.verify_msg, text, "%s: the message names the fault", c->name);
    }
    if (!ok(p.relabel_overrun == 0, "%s: relabellings read within compact_dims entries",
            c->name))
        diag("  %s", p.relabel_msg);
}

static int in_table(const char *name)
{
    for (size_t i = 0; i < NCASES; i++)
        if (strcmp(cases[i].name, name) == 0)
            return 1;
    return 0;
}

int main(void)
{
    const char *top = getenv("top_srcdir");
    snprintf(corpus, sizeof corpus, "%s/tests/files", top && *top ? top : ".");
    DIR *dir = opendir(corpus);
    if (dir == NULL) {   /* part of the tree: missing, the test is set up wrong */
        printf("Bail out! no corpus folder %s (set top_srcdir)\n", corpus);
        return 1;
    }

    /* The table and the folder agree: a file added by gen-amp.py must be
     * added here too, with its status and phase. */
    size_t nfiles = 0;
    char missing[4096] = "";
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "amp-", 4) != 0 || n < 5 || strcmp(e->d_name + n - 4, ".amp"))
            continue;
        nfiles++;
        if (!in_table(e->d_name) && strlen(missing) + n + 2 < sizeof missing) {
            strcat(missing, " ");
            strcat(missing, e->d_name);
        }
    }
    closedir(dir);
    is_str(missing, "", "every amp-*.amp file in %s is in the table", corpus);
    is_int(nfiles, NCASES, "the table lists the %zu files of the folder", (size_t)NCASES);

    for (size_t i = 0; i < NCASES; i++)
        run_case(&cases[i]);
    return done_testing();
}
