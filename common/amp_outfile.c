#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amp_outfile.h"

/* Temporary paths a signal handler may need to remove. Slots are claimed
 * and released by the thread that owns the output; the handler only reads
 * slots whose flag is set, and only calls unlink (async-signal-safe). */
#define LIVE_SLOTS 8
static char live_path[LIVE_SLOTS][PATH_MAX];
static volatile sig_atomic_t live_used[LIVE_SLOTS];

static void live_add(const char *p)
{
    if (strlen(p) >= PATH_MAX)
        return;
    for (int i = 0; i < LIVE_SLOTS; i++)
        if (!live_used[i]) {
            strcpy(live_path[i], p);
            live_used[i] = 1;
            return;
        }
}

static void live_remove(const char *p)
{
    for (int i = 0; i < LIVE_SLOTS; i++)
        if (live_used[i] && strcmp(live_path[i], p) == 0)
            live_used[i] = 0;
}

static void on_signal(int sig)
{
    for (int i = 0; i < LIVE_SLOTS; i++)
        if (live_used[i])
            unlink(live_path[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

void amp_outfile_cleanup_on_signals(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        /* Leave signals the caller's parent ignores (nohup) ignored. */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

amp_status amp_outfile_open(amp_outfile *of, const char *path, amp_error *err)
{
    memset(of, 0, sizeof *of);
    of->fd = -1;
    size_t n = strlen(path);
    of->final_path = strdup(path);
    of->tmp_path = malloc(n + 16);
    if (of->final_path == NULL || of->tmp_path == NULL) {
        amp_outfile_abort(of);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    snprintf(of->tmp_path, n + 16, "%s.tmp.XXXXXX", path);
    of->fd = mkstemp(of->tmp_path);
    if (of->fd < 0) {
        int e = errno;
        free(of->tmp_path);
        of->tmp_path = NULL;
        amp_outfile_abort(of);
        return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot create output: %s", path, strerror(e));
    }
    live_add(of->tmp_path);
    /* mkstemp creates 0600; output files get the usual umask-based mode. */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(of->fd, 0666 & ~mask);
    return AMP_OK;
}

amp_status amp_outfile_write(amp_outfile *of, const void *buf, size_t n, amp_error *err)
{
    AMP_CHECK(amp_outfile_pwrite(of, buf, n, of->written, err));
    of->written += n;
    amp_outfile_flush_behind(of);
    return AMP_OK;
}

amp_status amp_outfile_pwrite(amp_outfile *of, const void *buf, size_t n, uint64_t offset,
                              amp_error *err)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = pwrite(of->fd, p, n, (off_t)offset);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return AMP_FAIL(err, AMP_ERR_IO, "%s: write failed: %s", of->final_path,
                            strerror(errno));
        }
        p += w;
        n -= (size_t)w;
        offset += (uint64_t)w;
    }
    return AMP_OK;
}

void amp_outfile_flush_behind(amp_outfile *of)
{
    amp_outfile_flush_upto(of, of->written);
}

void amp_outfile_flush_upto(amp_outfile *of, uint64_t upto)
{
#ifdef SYNC_FILE_RANGE_WRITE
    /* Start writeback of every full 64 MiB as it is written, so that the
     * fsync at commit finds most of the file already on its way to disk
     * instead of flushing it all at the end. */
    const uint64_t step = UINT64_C(64) << 20;
    if (upto > of->flushing && upto - of->flushing >= step) {
        uint64_t len = (upto - of->flushing) / step * step;
        (void)sync_file_range(of->fd, (off_t)of->flushing, (off_t)len, SYNC_FILE_RANGE_WRITE);
        of->flushing += len;
    }
#else
    (void)of;
    (void)upto;
#endif
}

amp_status amp_outfile_commit(amp_outfile *of, amp_error *err)
{
    amp_status rc = AMP_OK;
    if (!of->no_sync && fsync(of->fd) != 0 && errno != EINVAL) {
        rc = AMP_FAIL(err, AMP_ERR_IO, "%s: cannot flush to disk: %s", of->final_path,
                      strerror(errno));
        goto fail;
    }
    int fd = of->fd;
    of->fd = -1;
    if (close(fd) != 0) {
        rc = AMP_FAIL(err, AMP_ERR_IO, "%s: close failed: %s", of->final_path, strerror(errno));
        goto fail;
    }
    if (rename(of->tmp_path, of->final_path) == 0) {
        live_remove(of->tmp_path);
    } else {
        rc = AMP_FAIL(err, AMP_ERR_IO, "%s: cannot rename %s into place: %s", of->final_path,
                      of->tmp_path, strerror(errno));
        goto fail;
    }
    free(of->tmp_path);
    of->tmp_path = NULL;
    /* The rename is durable only once the directory entry is on disk. */
    char *copy = of->no_sync ? NULL : strdup(of->final_path);
    if (copy != NULL) {
        int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(copy);
    }
fail:
    amp_outfile_abort(of);
    return rc;
}

void amp_outfile_abort(amp_outfile *of)
{
    if (of->fd >= 0)
        close(of->fd);
    of->fd = -1;
    if (of->tmp_path != NULL) {
        unlink(of->tmp_path);
        live_remove(of->tmp_path);
    }
    free(of->tmp_path);
    free(of->final_path);
    of->tmp_path = NULL;
    of->final_path = NULL;
}
