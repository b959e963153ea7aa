/* Output files that appear complete or not at all.
 *
 * Data goes to an unnamed file in the final name's directory (Linux
 * O_TMPFILE), which commit flushes to disk and links into place, then
 * syncs the directory. Where the file system refuses O_TMPFILE, a named
 * temporary file beside the final name (NAME.tmp.XXXXXX) takes its place
 * and commit renames it. A crash, a full disk or an error before commit
 * leaves no file under the final name; on the O_TMPFILE path it leaves no
 * file at all, even after SIGKILL.
 *
 * The environment variable AMPED_OUTFILE_NAMED=1 forces the named
 * temporary file, so that tests run both paths on one file system. */
#ifndef AMP_OUTFILE_H
#define AMP_OUTFILE_H

#include <stddef.h>
#include <stdint.h>

#include "amp_error.h"

typedef struct amp_outfile {
    char *final_path;
    char *tmp_path;      /* the named temporary file, or NULL (unnamed) */
    int fd;
    uint64_t written;
    uint64_t flushing;   /* bytes already handed to the kernel's writeback */
    int no_sync;         /* commit without fsync (see amp_outfile_commit) */
    int no_clobber;      /* commit fails if the final name exists */
} amp_outfile;

/* Create the file to write (unnamed, or the named temporary file): this
 * is where a missing or read-only directory fails, so open every output
 * before long work. A path naming a directory fails here too. */
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
/* fsync (unless no_sync is set), give the file its final name, then fsync
 * the directory. no_sync skips both fsyncs: other processes still see the
 * file complete or not at all, but a system crash soon after may leave it
 * damaged on disk (a reader's checksums catch that).
 *
 * With no_clobber set the file is linked to its final name, which fails
 * (AMP_ERR_IO, "already exists") if that name exists, whatever appeared
 * there since the caller looked. Without it an existing file is replaced
 * atomically: an unnamed file is first linked to NAME.tmp.XXXXXX, then
 * renamed over the final name, since a link cannot replace a name; a
 * SIGKILL between the two steps (microseconds) leaves that named file. */
amp_status amp_outfile_commit(amp_outfile *of, amp_error *err);
/* Drop the data (remove the named temporary file); safe after a failed
 * open or a commit. */
void amp_outfile_abort(amp_outfile *of);
/* 1 if of writes through an unnamed (O_TMPFILE) file. */
int amp_outfile_unnamed(const amp_outfile *of);

/* For programs (not libraries): on SIGINT, SIGTERM or SIGHUP remove the
 * named temporary files of every output still open, then die of the signal
 * as before; and ignore SIGXFSZ, so that a file-size limit (ulimit -f)
 * makes the write fail with EFBIG and take the error path (message, no
 * file left, exit 1) instead of killing the process. */
void amp_outfile_cleanup_on_signals(void);

#endif
