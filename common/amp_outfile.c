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
#include <time.h>
#include <unistd.h>

#include "amp_limits.h"
#include "amp_outfile.h"

/* Temporary paths a signal handler may need to remove. Slots are claimed
 * and released by the thread that owns the output; the handler only reads
 * slots whose flag is set, and only calls unlink (async-signal-safe). */
/* amped-run opens every output before it computes: a factor file per mode,
 * lambda and the reports. */
/* every output of a run: 2 N + 1 factor, lambda and index files, --json,
 * --report, and room */
#define LIVE_SLOTS (2 * AMP_MAX_MODES + 8)
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
    /* SIGXFSZ's default kills with no message and skips the cleanup;
     * ignored, the write past the limit fails with EFBIG instead. */
    signal(SIGXFSZ, SIG_IGN);
}

/* Errors of open(O_TMPFILE) that mean "not here" rather than a problem
 * with the directory: a kernel without it (EISDIR: O_TMPFILE includes
 * O_DIRECTORY, so an old kernel opens the directory itself), a file system
 * without it (EOPNOTSUPP), a libc or kernel that rejects the flags. */
static int tmpfile_refused(int e)
{
    return e == EOPNOTSUPP || e == EISDIR || e == EINVAL || e == ENOSYS;
}

static char *dir_of(const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL)
        return NULL;
    char *d = strdup(dirname(copy));
    free(copy);
    return d;
}

#ifdef O_TMPFILE
/* An unnamed file in path's directory: its fd, or -1 with errno set. */
static int open_unnamed(const char *path)
{
    const char *force = getenv("AMPED_OUTFILE_NAMED");
    if (force != NULL && (strcmp(force, "1") == 0 || strcmp(force, "2") == 0)) {
        errno = EOPNOTSUPP;
        return -1;
    }
    char *dir = dir_of(path);
    if (dir == NULL) {
        errno = ENOMEM;
        return -1;
    }
    /* The mode goes through the umask, as for any new file. */
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
    int e = errno;
    free(dir);
    errno = e;
    return fd;
}
#endif

amp_status amp_outfile_open(amp_outfile *of, const char *path, amp_error *err)
{
    memset(of, 0, sizeof *of);
    of->fd = -1;
    of->final_path = strdup(path);
    if (of->final_path == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        amp_outfile_abort(of);
        return AMP_FAIL(err, AMP_ERR_IO, "%s: is a directory", path);
    }
#ifdef O_TMPFILE
    of->fd = open_unnamed(path);
    if (of->fd >= 0)
        return AMP_OK;
    if (!tmpfile_refused(errno)) {
        int e = errno;
        amp_outfile_abort(of);
        return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot create output: %s", path, strerror(e));
    }
#endif
    size_t n = strlen(path);
    of->tmp_path = malloc(n + 16);
    if (of->tmp_path == NULL) {
        amp_outfile_abort(of);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    snprintf(of->tmp_path, n + 16, "%s.tmp.XXXXXX", path);
    of->fd = mkostemp(of->tmp_path, O_CLOEXEC);
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

int amp_outfile_unnamed(const amp_outfile *of)
{
    return of->fd >= 0 && of->tmp_path == NULL;
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

/* Link the unnamed file fd to name: through /proc/self/fd, which needs
 * no privilege, else (no /proc) AT_EMPTY_PATH, which older kernels allow
 * only with CAP_DAC_READ_SEARCH. 0, or -1 with errno set. */
static int link_unnamed(int fd, const char *name)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    if (errno != ENOENT || access("/proc/self/fd", F_OK) == 0)
        return -1;
#ifdef AT_EMPTY_PATH
    return linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH);
#else
    return -1;
#endif
}

/* The unnamed file fd under a fresh name beside final (NAME.tmp.XXXXXX,
 * registered for the signal handler), for a rename over final. The
 * name in tmp (n bytes). 0, or -1 with errno set. */
static int link_unnamed_temp(int fd, const char *final, char *tmp, size_t n)
{
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)tmp;
    for (int attempt = 0; attempt < 100; attempt++) {
        char suffix[7];
        for (int i = 0; i < 6; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            suffix[i] = digits[(x >> 33) % (sizeof digits - 1)];
        }
        suffix[6] = '\0';
        snprintf(tmp, n, "%s.tmp.%s", final, suffix);
        live_add(tmp);
        if (link_unnamed(fd, tmp) == 0)
            return 0;
        int e = errno;
        live_remove(tmp);
        if (e != EEXIST) {
            errno = e;
            return -1;
        }
    }
    errno = EEXIST;
    return -1;
}

/* A hard link, or (AMPED_OUTFILE_NAMED=2, for tests) EPERM as a file
 * system without hard links gives. */
static int hard_link(const char *from, const char *to)
{
    const char *force = getenv("AMPED_OUTFILE_NAMED");
    if (force != NULL && strcmp(force, "2") == 0) {
        errno = EPERM;
        return -1;
    }
    return link(from, to);
}

/* The named temporary file to the final name unless that exists, where
 * the file system has no hard links (vfat, exFAT, some FUSE and SMB
 * mounts, which also refuse O_TMPFILE): renameat2's RENAME_NOREPLACE, and
 * where that is refused too, a look then a rename (a file that appears
 * between the two is replaced: the one window left). */
static int move_no_clobber(const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return -1;
#endif
    struct stat st;
    if (lstat(to, &st) == 0) {
        errno = EEXIST;
        return -1;
    }
    return rename(from, to);
}

/* The complete file, closed, from its temporary name to the final one:
 * linked (no_clobber) or renamed over whatever is there. */
static amp_status put_in_place(amp_outfile *of, amp_error *err)
{
    const char *final = of->final_path;
    if (of->no_clobber) {
        if (hard_link(of->tmp_path, final) == 0)
            return AMP_OK;   /* abort removes the temporary name */
        if (errno == EPERM || errno == EOPNOTSUPP || errno == ENOSYS) {
            if (move_no_clobber(of->tmp_path, final) == 0) {
                live_remove(of->tmp_path);
                free(of->tmp_path);
                of->tmp_path = NULL;
                return AMP_OK;
            }
        }
        if (errno == EEXIST)
            return AMP_FAIL(err, AMP_ERR_IO, "%s: already exists", final);
        return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot link the output into place: %s", final,
                        strerror(errno));
    }
    if (rename(of->tmp_path, final) != 0)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot rename %s into place: %s", final,
                        of->tmp_path, strerror(errno));
    live_remove(of->tmp_path);
    free(of->tmp_path);
    of->tmp_path = NULL;
    return AMP_OK;
}

/* An unnamed file (O_TMPFILE) under a temporary name beside the final
 * one, so that it can be closed before it takes the final name, as a
 * named one is: closed, an unnamed file is gone. */
static amp_status name_unnamed(amp_outfile *of, amp_error *err)
{
    size_t n = strlen(of->final_path) + 16;
    of->tmp_path = malloc(n);
    if (of->tmp_path == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    if (link_unnamed_temp(of->fd, of->final_path, of->tmp_path, n) != 0) {
        int e = errno;
        free(of->tmp_path);
        of->tmp_path = NULL;
        return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot link the output into place: %s",
                        of->final_path, strerror(e));
    }
    return AMP_OK;
}

/* The file's descriptor closed (and forgotten, so abort closes nothing). */
static amp_status close_out(amp_outfile *of, amp_error *err)
{
    int fd = of->fd;
    of->fd = -1;
    if (close(fd) != 0)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: close failed: %s", of->final_path,
                        strerror(errno));
    return AMP_OK;
}

amp_status amp_outfile_commit(amp_outfile *of, amp_error *err)
{
    amp_status rc = AMP_OK;
    if (!of->no_sync && fsync(of->fd) != 0 && errno != EINVAL) {
        rc = AMP_FAIL(err, AMP_ERR_IO, "%s: cannot flush to disk: %s", of->final_path,
                      strerror(errno));
        goto fail;
    }
    /* Closed before it takes the final name, so that a late write error
     * (NFS reports some at close) leaves no file there. */
    if (of->tmp_path == NULL)
        AMP_CHECK_GOTO(name_unnamed(of, err), rc, fail);
    AMP_CHECK_GOTO(close_out(of, err), rc, fail);
    AMP_CHECK_GOTO(put_in_place(of, err), rc, fail);
    /* The new name is durable only once the directory entry is on disk. */
    char *dir = of->no_sync ? NULL : dir_of(of->final_path);
    if (dir != NULL) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(dir);
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
