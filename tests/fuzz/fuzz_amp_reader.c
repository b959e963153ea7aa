/* libFuzzer target for the .amp reader: any byte string must be refused
 * with a status or read cleanly, never crash or read out of bounds.
 *
 * The input becomes an in-memory file (memfd) opened by path, so the real
 * pread-based reader runs. Files that open are read section by section,
 * chunk contents and relabellings checked, then verified as a whole.
 * Sections claiming more than 64 MiB are not read: that is legitimate for
 * real files (a chunk may hold 4 GiB) and only the caller's memory policy,
 * not the reader's correctness, is at stake. Build and run: make fuzz. */
#define _GNU_SOURCE
#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "amped_format.h"

#define READ_LIMIT (UINT64_C(64) << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("amp-fuzz", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size > 0 && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    amp_error err = {0};
    amp_file *f = NULL;
    if (amp_file_open(path, &f, &err) == AMP_OK) {
        const amp_file_info *in = amp_file_info_get(f);
        amp_section_reader *r = NULL;
        int all_small = 1;
        if (amp_section_reader_new(f, &r, &err) == AMP_OK) {
            for (size_t i = 0; i < in->nsections; i++) {
                const amp_section *s = amp_file_section(f, i);
                if (s->raw_size > READ_LIMIT) {
                    all_small = 0;
                    continue;
                }
                void *buf = malloc(s->raw_size + 8);
                amp_error e = {0};
                if (buf && amp_section_read(r, s, buf, s->raw_size, &e) == AMP_OK &&
                    s->type == AMP_SECTION_CHUNK)
                    (void)amp_chunk_check(f, s, buf, &e);
                free(buf);
            }
            amp_section_reader_free(r);
        }
        const amp_meta *m = amp_file_meta(f);
        for (unsigned d = 0; d < m->nmodes; d++) {
            if (m->compact_dims[d] * 8 > READ_LIMIT)
                continue;
            uint64_t *map = malloc(m->compact_dims[d] * 8);
            amp_error e = {0};
            if (map)
                (void)amp_file_read_relabel(f, d, map, &e);
            free(map);
        }
        if (all_small) {
            amp_error e = {0};
            size_t bad;
            (void)amp_file_verify(f, 1, NULL, NULL, &bad, &e);
        }
        amp_file_close(f);
    }
    close(fd);
    return 0;
}
