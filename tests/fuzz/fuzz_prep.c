/* libFuzzer target for amped-prep's pipeline: any byte string as .tns
 * text is parsed (index base detected, or forced by the first byte) and
 * duplicates summed; what parses is built into an .amp file with 1 to 7
 * shards a mode and chunks of 1 to 13 nonzeros (so chunks, shards and key
 * blocks are cut everywhere), remap streams on a third of the inputs, and
 * read back: opened, verified and loaded as amped-run loads it.
 *
 * Two oracles beyond the sanitizers: a file the build just wrote must open,
 * verify and load (abort otherwise), and the loaded tensor must have the
 * parsed one's nonzero count. Build and run: make fuzz-prep. */
#define _GNU_SOURCE
#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amp_build.h"
#include "amp_core.h"
#include "amp_coo.h"
#include "amped_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    amp_read_opts ro;
    amp_read_opts_init(&ro);
    if (size > 0 && (data[0] & 1))
        ro.index_base = data[0] & 2 ? 1 : 0;
    amp_coo t;
    memset(&t, 0, sizeof t);
    amp_read_info info;
    amp_error err = {0};
    if (amp_parse_tns_buffer("fuzz.tns", (const char *)data, size, &ro, &t, &info, &err) !=
            AMP_OK ||
        t.nnz == 0 || t.nnz > 100000) {
        amp_coo_free(&t);
        return 0;
    }
    const uint64_t nnz = t.nnz;
    char path[64];
    snprintf(path, sizeof path, "/tmp/amp-fuzz-prep-%d.amp", (int)getpid());
    amp_build_opts bo;
    amp_build_opts_init(&bo);
    bo.shards = 1 + (uint32_t)(size % 7);
    bo.chunk_nnz = 1 + size % 13;
    bo.remap_streams = size % 3 == 0;
    bo.write.threads = 1;
    bo.write.no_sync = 1;
    amp_build_report rep;
    if (amp_build_write(&t, path, &bo, &rep, &err) == AMP_OK) {
        amp_file *f = NULL;
        size_t nbad = 0;
        amp_tensor lt;
        memset(&lt, 0, sizeof lt);
        if (amp_file_open(path, &f, &err) != AMP_OK ||
            amp_file_verify(f, 1, NULL, NULL, &nbad, &err) != AMP_OK ||
            amp_tensor_load(f, 1, NULL, NULL, &lt, &err) != AMP_OK || lt.nnz != nnz) {
            fprintf(stderr, "fuzz-prep: a file just built does not read back: %s\n",
                    amp_error_message(&err));
            abort();
        }
        amp_tensor_free(&lt);
        amp_file_close(f);
        unlink(path);
    }
    amp_coo_free(&t);
    return 0;
}
