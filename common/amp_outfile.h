/* Output files that appear complete or not at all.
 *
 * Data goes to a temporary file beside the final name (same directory, so
 * the rename cannot cross file systems); commit flushes it to disk, renames
 * it into place and syncs the directory. A crash, a full disk or an error
 * before commit leaves no file under the final name. */
#ifndef AMP_OUTFILE_H
#define AMP_OUTFILE_H

#include <stddef.h>
#include <stdint.h>

#include "amp_error.h"

typedef struct amp_outfile {
    char *final_path;
    char *tmp_path;
    int fd;
    uint64_t written;
    uint64_t flushing;   /* bytes already handed to the kernel's writeback */
    int no_sync;         /* commit without fsync (see amp_outfile_commit) */
} amp_outfile;

amp_status amp_outfile_open(amp_outfile *of, const char *path, amp_error *err);
/* Append n bytes. */
amp_status amp_outfile_write(amp_outfile *of, const void *buf, size_t n, amp_error *err);
/* Write n bytes at offset, for writers that reserve space (advance
 * `written` themselves) and fill it from several threads. */
amp_status amp_outfile_pwrite(amp_outfile *of, const void *buf, size_t n, uint64_t offset,
                              amp_error *err);
/* Start writeback of what has been written so far (in 64 MiB steps), so
 * that commit's fsync finds most of it on its way to disk. */
void amp_outfile_flush_behind(amp_outfile *of);
/* The same for a writer that knows the first upto bytes are written
 * (and may be behind `written`, which counts bytes reserved). */
void amp_outfile_flush_upto(amp_outfile *of, uint64_t upto);
/* fsync (unless no_sync is set), close, rename into place, then fsync the
 * directory. no_sync skips both fsyncs: other processes still see the file
 * complete or not at all, but a system crash soon after may leave it
 * damaged on disk (a reader's checksums catch that). */
amp_status amp_outfile_commit(amp_outfile *of, amp_error *err);
/* Remove the temporary file; safe after a failed open or a commit. */
void amp_outfile_abort(amp_outfile *of);

/* For programs (not libraries): on SIGINT, SIGTERM or SIGHUP remove the
 * temporary files of every output still open, then die of the signal as
 * before. (SIGKILL cannot be caught: it can leave a temporary file behind,
 * never a partial file under the final name.) */
void amp_outfile_cleanup_on_signals(void);

#endif
