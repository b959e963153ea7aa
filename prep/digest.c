/* The source fingerprint recorded in an .amp file: size and XXH3-64 of the
 * input file as it lies on disk, the value `xxhsum -H3` prints, so a user
 * can tell which file a prepared tensor came from. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "amp_tensor.h"

amp_status amp_file_digest(const char *path, uint64_t *size, uint64_t *hash, amp_error *err)
{
    enum { BLOCK = 4 << 20 };
    *size = 0;
    *hash = 0;
    amp_status rc = AMP_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return AMP_FAIL(err, AMP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    XXH3_state_t *state = XXH3_createState();
    unsigned char *buf = malloc(BLOCK);
    if (state == NULL || buf == NULL)
        AMP_RAISE_GOTO(err, rc, done, AMP_ERR_NOMEM, "out of memory");
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        goto done;   /* a pipe or device: no fingerprint, not an error */
    XXH3_64bits_reset(state);
    for (;;) {
        ssize_t r = read(fd, buf, BLOCK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            AMP_RAISE_GOTO(err, rc, done, AMP_ERR_IO, "%s: read failed: %s", path,
                           strerror(errno));
        if (r == 0)
            break;
        XXH3_64bits_update(state, buf, (size_t)r);
        *size += (uint64_t)r;
    }
    *hash = XXH3_64bits_digest(state);
done:
    free(buf);
    XXH3_freeState(state);
    close(fd);
    return rc;
}
