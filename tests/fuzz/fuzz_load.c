/* libFuzzer target for the loaders behind amped-run and amped-prep's
 * binary input: any byte string, as an .amp file, goes through
 * amp_tensor_load (every copy decompressed, every index checked against
 * its mode), and, as a FROSTT binary tensor, through amp_read_tensor. Each
 * must be refused with a status or read cleanly; never crash or read out
 * of bounds. Inputs are in-memory files (memfd) opened by path. Build and
 * run: make fuzz-load. */
#define _GNU_SOURCE
#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "amp_core.h"
#include "amp_coo.h"
#include "amped_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* data as a file; *path gets its name. -1 if it cannot be made. */
static int as_file(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("amp-fuzz-load", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (size > 0 && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return -1;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = as_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    amp_error err = {0};
    amp_file *f = NULL;
    if (amp_file_open(path, &f, &err) == AMP_OK) {
        amp_tensor t;
        memset(&t, 0, sizeof t);
        if (amp_tensor_load(f, 1, NULL, NULL, &t, &err) == AMP_OK)
            amp_tensor_free(&t);
        amp_file_close(f);
    }
    amp_read_opts ro;
    amp_read_opts_init(&ro);
    ro.format = AMP_INPUT_BIN;
    amp_coo c;
    memset(&c, 0, sizeof c);
    amp_read_info info;
    (void)amp_read_tensor(path, &ro, &c, &info, &err);
    amp_coo_free(&c);
    close(fd);
    return 0;
}
