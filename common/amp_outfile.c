#include <config.h>

#include <ctype.h>
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
/* Set while amp_outfile_place_all renames a set into place: a signal then
 * waits in deferred_sig until the set is whole, on whichever thread the
 * kernel delivered it to. */
static volatile sig_atomic_t placing, deferred_sig;

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
    if (placing) {
        deferred_sig = sig;
        return;
    }
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

/* path + "/" + name, malloc'd. */
static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* N where p names a descriptor of this process (/dev/fd/N,
 * /proc/self/fd/N or /proc/PID/fd/N of this PID, /dev/stdout,
 * /dev/stderr), else -1. Such a path is a descriptor the caller opened
 * (a shell's 3>file, >(...)), so it is written through a copy of it:
 * opening /proc's link anew would replace a pipe's reader's view of
 * nothing, and renaming over it is impossible. */
static int fd_path(const char *p)
{
    if (strcmp(p, "/dev/stdout") == 0)
        return 1;
    if (strcmp(p, "/dev/stderr") == 0)
        return 2;
    const char *rest = NULL;
    if (strncmp(p, "/dev/fd/", 8) == 0) {
        rest = p + 8;
    } else if (strncmp(p, "/proc/self/fd/", 14) == 0) {
        rest = p + 14;
    } else if (strncmp(p, "/proc/", 6) == 0 && isdigit((unsigned char)p[6])) {
        char *end;
        long pid = strtol(p + 6, &end, 10);
        if (pid == (long)getpid() && strncmp(end, "/fd/", 4) == 0)
            rest = end + 4;
    }
    if (rest == NULL || !isdigit((unsigned char)*rest))
        return -1;
    char *end;
    errno = 0;
    long n = strtol(rest, &end, 10);
    if (*end != '\0' || errno != 0 || n > INT_MAX)
        return -1;
    return (int)n;
}

/* path with its symlinks followed as far as they lead (the last may point
 * at nothing yet: the file to create) into *out (malloc'd), or, where a
 * step names a descriptor of this process, its number in *fd. 0, or -1
 * with errno set (ELOOP past 40 links, as the kernel counts). */
static int follow_links(const char *path, char **out, int *fd)
{
    char *p = strdup(path);
    *out = NULL;
    *fd = -1;
    for (int hop = 0; p != NULL && hop <= 40; hop++) {
        struct stat st;
        int n = fd_path(p);
        if (n >= 0 || lstat(p, &st) != 0 || !S_ISLNK(st.st_mode)) {
            *fd = n;
            *out = p;
            return 0;
        }
        char target[PATH_MAX];
        ssize_t len = readlink(p, target, sizeof target - 1);
        if (len < 0) {
            int e = errno;
            free(p);
            errno = e;
            return -1;
        }
        target[len] = '\0';
        char *dir = target[0] == '/' ? NULL : dir_of(p);
        char *next = target[0] == '/' ? strdup(target) : dir ? join(dir, target) : NULL;
        free(dir);
        free(p);
        p = next;
    }
    errno = p == NULL ? ENOMEM : ELOOP;
    free(p);
    return -1;
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

/* The descriptor n copied for of: a direct output. */
static amp_status open_fd(amp_outfile *of, int n, amp_error *err)
{
    const char *path = of->final_path;
    int flags = fcntl(n, F_GETFL);
    if (flags < 0)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: descriptor %d is not open", path, n);
    if ((flags & O_ACCMODE) == O_RDONLY)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: descriptor %d is open for reading only", path,
                        n);
    of->fd = fcntl(n, F_DUPFD_CLOEXEC, 3);
    if (of->fd < 0)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: %s", path, strerror(errno));
    of->direct = 1;
    return AMP_OK;
}

/* A character device or FIFO opened to write in place: no O_TRUNC (a
 * device has nothing to cut; a FIFO's open waits for a reader). */
static amp_status open_special(amp_outfile *of, const struct stat *st, amp_error *err)
{
    const char *path = of->final_path;
    if (S_ISBLK(st->st_mode) || S_ISSOCK(st->st_mode))
        return AMP_FAIL(err, AMP_ERR_IO, "%s: is a %s; an output is a file, a character "
                        "device, a FIFO or '-' (standard output)", path,
                        S_ISBLK(st->st_mode) ? "block device" : "socket");
    do
        of->fd = open(of->place_path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    while (of->fd < 0 && errno == EINTR);
    if (of->fd < 0)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot open for writing: %s", path,
                        strerror(errno));
    of->direct = 1;
    return AMP_OK;
}

amp_status amp_outfile_open(amp_outfile *of, const char *path, amp_error *err)
{
    memset(of, 0, sizeof *of);
    of->fd = -1;
    of->final_path = strdup(path);
    if (of->final_path == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    amp_status rc = AMP_OK;
    if (strcmp(path, "-") == 0) {
        of->fd = STDOUT_FILENO;
        of->direct = 1;
        of->keep_fd = 1;
        return AMP_OK;
    }
    int fdn;
    if (follow_links(path, &of->place_path, &fdn) != 0) {
        int e = errno;
        amp_outfile_abort(of);
        return AMP_FAIL(err, e == ENOMEM ? AMP_ERR_NOMEM : AMP_ERR_IO, "%s: cannot follow "
                        "the link: %s", path, strerror(e));
    }
    if (fdn >= 0) {
        AMP_CHECK_GOTO(open_fd(of, fdn, err), rc, fail);
        return AMP_OK;
    }
    path = of->place_path;
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode))
            AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_IO, "%s: is a directory", of->final_path);
        AMP_CHECK_GOTO(open_special(of, &st, err), rc, fail);
        return AMP_OK;
    }
#ifdef O_TMPFILE
    of->fd = open_unnamed(path);
    if (of->fd >= 0)
        return AMP_OK;
    if (!tmpfile_refused(errno)) {
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_IO, "%s: cannot create output: %s",
                       of->final_path, strerror(errno));
    }
#endif
    size_t n = strlen(path);
    of->tmp_path = malloc(n + 16);
    if (of->tmp_path == NULL)
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_NOMEM, "out of memory");
    snprintf(of->tmp_path, n + 16, "%s.tmp.XXXXXX", path);
    of->fd = mkostemp(of->tmp_path, O_CLOEXEC);
    if (of->fd < 0) {
        int e = errno;
        free(of->tmp_path);
        of->tmp_path = NULL;
        AMP_RAISE_GOTO(err, rc, fail, AMP_ERR_IO, "%s: cannot create output: %s",
                       of->final_path, strerror(e));
    }
    live_add(of->tmp_path);
    /* mkstemp creates 0600; output files get the usual umask-based mode. */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(of->fd, 0666 & ~mask);
    return AMP_OK;
fail:
    amp_outfile_abort(of);
    return rc;
}

int amp_outfile_unnamed(const amp_outfile *of)
{
    return of->fd >= 0 && of->tmp_path == NULL && !of->direct;
}

int amp_outfile_direct(const amp_outfile *of)
{
    return of->direct;
}

amp_status amp_outfile_write(amp_outfile *of, const void *buf, size_t n, amp_error *err)
{
    AMP_CHECK(amp_outfile_pwrite(of, buf, n, of->written, err));
    of->written += n;
    if (!of->direct)
        amp_outfile_flush_behind(of);
    return AMP_OK;
}

amp_status amp_outfile_pwrite(amp_outfile *of, const void *buf, size_t n, uint64_t offset,
                              amp_error *err)
{
    const char *p = buf;
    while (n > 0) {
        /* A pipe or terminal has no offsets: a direct output is written
         * where its descriptor stands, in order (nothing that reserves
         * space writes to one: amped-prep refuses an .amp there). */
        ssize_t w = of->direct ? write(of->fd, p, n) : pwrite(of->fd, p, n, (off_t)offset);
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
    if (of->direct)
        return;
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
    const char *final = of->place_path;
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
            return AMP_FAIL(err, AMP_ERR_IO, "%s: already exists", of->final_path);
        return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot link the output into place: %s",
                        of->final_path, strerror(errno));
    }
    if (rename(of->tmp_path, final) != 0)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot rename %s into place: %s",
                        of->final_path, of->tmp_path, strerror(errno));
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
    size_t n = strlen(of->place_path) + 16;
    of->tmp_path = malloc(n);
    if (of->tmp_path == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    if (link_unnamed_temp(of->fd, of->place_path, of->tmp_path, n) != 0) {
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
    if (of->keep_fd)
        return AMP_OK;
    if (close(fd) != 0)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: close failed: %s", of->final_path,
                        strerror(errno));
    return AMP_OK;
}

amp_status amp_outfile_finish(amp_outfile *of, amp_error *err)
{
    amp_status rc = AMP_OK;
    if (of->direct) {
        AMP_CHECK_GOTO(close_out(of, err), rc, fail);
        of->finished = 1;
        return AMP_OK;
    }
    if (!of->no_sync && fsync(of->fd) != 0 && errno != EINVAL) {
        rc = AMP_FAIL(err, AMP_ERR_IO, "%s: cannot flush to disk: %s", of->final_path,
                      strerror(errno));
        goto fail;
    }
    /* An unnamed file stays open and nameless until it is placed, so
     * that a process killed meanwhile (SIGKILL included) leaves nothing;
     * a named one is closed now, so that a late write error (NFS reports
     * some at close) comes before any output takes its name. */
    if (of->tmp_path != NULL)
        AMP_CHECK_GOTO(close_out(of, err), rc, fail);
    of->finished = 1;
    return AMP_OK;
fail:
    amp_outfile_abort(of);
    return rc;
}

/* The new name is durable only once the directory entry is on disk. */
static void sync_dir(const amp_outfile *of)
{
    char *dir = of->no_sync || of->direct ? NULL : dir_of(of->place_path);
    if (dir == NULL)
        return;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(dir);
}

/* The same directory as an earlier one of ofs[0..i): synced with it. */
static int dir_seen(amp_outfile *const *ofs, size_t i)
{
    char *d = dir_of(ofs[i]->place_path);
    int seen = 0;
    for (size_t j = 0; d != NULL && j < i && !seen; j++) {
        if (ofs[j] == NULL || ofs[j]->direct || ofs[j]->place_path == NULL)
            continue;
        char *e = dir_of(ofs[j]->place_path);
        seen = e != NULL && strcmp(d, e) == 0;
        free(e);
    }
    free(d);
    return seen;
}

amp_status amp_outfile_place_all(amp_outfile *const *ofs, size_t n, amp_error *err)
{
    amp_status rc = AMP_OK;
    size_t placed = 0;
    /* The unnamed files named beside their final names and closed first
     * (a failure here places none), so that the window in which a
     * SIGKILL leaves a set half placed is the renames alone. */
    for (size_t i = 0; i < n && rc == AMP_OK; i++) {
        amp_outfile *of = ofs[i];
        if (of == NULL || of->direct || of->tmp_path != NULL)
            continue;
        rc = name_unnamed(of, err);
        if (rc == AMP_OK)
            rc = close_out(of, err);
    }
    if (rc != AMP_OK)
        return rc;
    placing = 1;
    for (size_t i = 0; i < n && rc == AMP_OK; i++) {
        if (ofs[i] == NULL || ofs[i]->direct)
            continue;
        rc = put_in_place(ofs[i], err);
        placed += rc == AMP_OK;
        if (rc == AMP_OK && ofs[i]->placed != NULL)
            ofs[i]->placed(ofs[i]);
    }
    placing = 0;
    if (rc != AMP_OK && placed > 0 && err != NULL) {
        char why[AMP_ERROR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err->msg);
        amp_error_clear(err);
        AMP_FAIL(err, rc, "%s (%zu output%s before it already in place)", why, placed,
                 amp_plural(placed));
    }
    int sig = deferred_sig;
    if (sig != 0)
        on_signal(sig);
    for (size_t i = 0; i < n && rc == AMP_OK; i++)
        if (ofs[i] != NULL && !ofs[i]->direct && !dir_seen(ofs, i))
            sync_dir(ofs[i]);
    return rc;
}

amp_status amp_outfile_commit(amp_outfile *of, amp_error *err)
{
    amp_status rc = amp_outfile_finish(of, err);
    if (rc == AMP_OK)
        rc = amp_outfile_place_all(&of, 1, err);
    amp_outfile_abort(of);
    return rc;
}

void amp_outfile_abort(amp_outfile *of)
{
    if (of->fd >= 0 && !of->keep_fd)
        close(of->fd);
    of->fd = -1;
    if (of->tmp_path != NULL) {
        unlink(of->tmp_path);
        live_remove(of->tmp_path);
    }
    free(of->tmp_path);
    free(of->final_path);
    free(of->place_path);
    of->tmp_path = NULL;
    of->final_path = NULL;
    of->place_path = NULL;
}

/* What a path names, for amp_outfile_check_distinct: the object where one
 * exists, and in any case the path resolved (symlinks followed, its
 * directory through realpath), so that two names of a file yet to be
 * created compare equal. */
typedef struct path_id {
    int exists;
    struct stat st;
    char *where;   /* malloc'd; NULL for a descriptor */
} path_id;

static void identify(const char *path, int input, path_id *id)
{
    memset(id, 0, sizeof *id);
    char *p = NULL;
    int fd = -1;
    if (strcmp(path, "-") == 0)
        fd = input ? STDIN_FILENO : STDOUT_FILENO;
    else if (follow_links(path, &p, &fd) != 0)
        p = strdup(path);
    if (fd >= 0) {
        id->exists = fstat(fd, &id->st) == 0;
        free(p);
        return;
    }
    if (p == NULL)
        return;
    id->exists = stat(p, &id->st) == 0;
    char *real = realpath(p, NULL);
    if (real == NULL) {
        char *copy = strdup(p), *dir = dir_of(p);
        char *rdir = dir ? realpath(dir, NULL) : NULL;
        real = rdir && copy ? join(rdir, basename(copy)) : NULL;
        free(copy);
        free(dir);
        free(rdir);
    }
    id->where = real ? real : p;
    if (real)
        free(p);
}

static int same_file(const path_id *a, const path_id *b)
{
    if (a->exists && b->exists)
        return a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino;
    return !a->exists && !b->exists && a->where && b->where && strcmp(a->where, b->where) == 0;
}

amp_status amp_outfile_check_distinct(const char *const *paths, const char *const *what,
                                      const int *is_input, size_t n, amp_error *err)
{
    path_id *ids = calloc(n ? n : 1, sizeof *ids);
    if (ids == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        identify(paths[i], is_input ? is_input[i] : 0, &ids[i]);
    amp_status rc = AMP_OK;
    for (size_t i = 0; i < n && rc == AMP_OK; i++)
        for (size_t j = i + 1; j < n && rc == AMP_OK; j++) {
            if (!same_file(&ids[i], &ids[j]))
                continue;
            /* Writing twice to /dev/null or a terminal is as harmless as
             * it is common; a FIFO's one reader would get both mixed. */
            if (ids[i].exists && S_ISCHR(ids[i].st.st_mode))
                continue;
            rc = AMP_FAIL(err, AMP_ERR_USAGE, "%s %s: the same file as %s %s", what[j],
                          paths[j], what[i], paths[i]);
        }
    for (size_t i = 0; i < n; i++)
        free(ids[i].where);
    free(ids);
    return rc;
}
