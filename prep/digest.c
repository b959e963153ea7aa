/* The source fingerprint recorded in an .amp file: size and XXH3-64 of the
 * input file as it lies on disk, the value `xxhsum -H3` prints, so a user
 * can tell which file a prepared tensor came from.
 *
 * The hash is one sequential pass over the file, so it runs on a thread of
 * its own beside the parse: in line, it was a measurable share of a prep of
 * cpu20m on many cores, with every other core idle (bench/RESULTS.md,
 * issue 4). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "amp_coo.h"

struct amp_digest_job {
    char *path;
    pthread_t thread;
    int cancel;          /* read with atomics: the owner may give up early */
    uint64_t size, hash;
    amp_status rc;
    amp_error err;
};

static void *digest_run(void *arg)
{
    enum { BLOCK = 4 << 20 };
    amp_digest_job *job = arg;
    const char *path = job->path;
    amp_error *err = &job->err;
    amp_status rc = AMP_OK;
    XXH3_state_t *state = NULL;
    unsigned char *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        job->rc = AMP_FAIL(err, AMP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    state = XXH3_createState();
    buf = malloc(BLOCK);
    if (state == NULL || buf == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
    XXH3_64bits_reset(state);
    uint64_t size = 0;
    while (!__atomic_load_n(&job->cancel, __ATOMIC_RELAXED)) {
        ssize_t r = read(fd, buf, BLOCK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_IO, "%s: read failed: %s", path,
                           strerror(errno));
        if (r == 0) {
            job->size = size;
            job->hash = XXH3_64bits_digest(state);
            break;
        }
        XXH3_64bits_update(state, buf, (size_t)r);
        size += (uint64_t)r;
    }
done:
    free(buf);
    XXH3_freeState(state);
    close(fd);
    job->rc = rc;
    return NULL;
}

amp_status amp_file_digest_start(const char *path, amp_digest_job **jobp, amp_error *err)
{
    *jobp = NULL;
    /* Only regular files: opening a named pipe a second time would block,
     * or take bytes from the parse. */
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return AMP_OK;
    amp_digest_job *job = calloc(1, sizeof *job);
    if (job == NULL || (job->path = strdup(path)) == NULL) {
        free(job);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    }
    if (pthread_create(&job->thread, NULL, digest_run, job) != 0) {
        free(job->path);
        free(job);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: cannot start a thread to fingerprint it",
                        path);
    }
    *jobp = job;
    return AMP_OK;
}

amp_status amp_file_digest_finish(amp_digest_job *job, uint64_t *size, uint64_t *hash,
                                  amp_error *err)
{
    if (size != NULL)
        *size = 0;
    if (hash != NULL)
        *hash = 0;
    if (job == NULL)
        return AMP_OK;
    if (size == NULL && hash == NULL)
        __atomic_store_n(&job->cancel, 1, __ATOMIC_RELAXED);
    pthread_join(job->thread, NULL);
    amp_status rc = job->rc;
    if (rc != AMP_OK)
        amp_error_set(err, rc, job->err.src_file, job->err.src_line, "%s", job->err.msg);
    else if (size != NULL && hash != NULL) {
        *size = job->size;
        *hash = job->hash;
    }
    free(job->path);
    free(job);
    return rc;
}
