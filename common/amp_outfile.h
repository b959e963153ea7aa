/* Output files that appear complete or not at all, and the special files
 * a Unix tool writes directly.
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
 * temporary file, so that tests run both paths on one file system.
 *
 * What a path names decides how it is written:
 * - "-": standard output, written directly (never closed here);
 * - /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N (and a symlink
 *   to one): a copy of that descriptor, written directly;
 * - a character device or a FIFO: opened and written directly (a FIFO's
 *   open waits for a reader); a write error is an error, but what was
 *   written before it stays written;
 * - a block device or a socket: refused;
 * - a symlink: followed, so that the file it points to (existing or not)
 *   is replaced in its own directory and the link stays;
 * - anything else (a regular file, or nothing yet): through the temporary
 *   file and a rename, as above. */
#ifndef AMP_OUTFILE_H
#define AMP_OUTFILE_H

#include <stddef.h>
#include <stdint.h>

#include "amp_error.h"

typedef struct amp_outfile {
    char *final_path;    /* the path as given, for messages */
    char *place_path;    /* where the file goes: final_path, symlinks followed */
    char *tmp_path;      /* the named temporary file, or NULL (unnamed) */
    int fd;
    uint64_t written;
    uint64_t flushing;   /* bytes already handed to the kernel's writeback */
    int no_sync;         /* commit without fsync (see amp_outfile_commit) */
    int no_clobber;      /* commit fails if the final name exists */
    int direct;          /* a device, FIFO or descriptor, written in place */
    int keep_fd;         /* fd is standard output: never closed here */
    int finished;        /* complete under its temporary name (or closed) */
    /* Optional, set after the open: called the moment the file has its
     * final name, inside amp_outfile_place_all (tests stop a run there,
     * tests/amped-run-hooks). */
    void (*placed)(const struct amp_outfile *of);
} amp_outfile;

/* Create the file to write (unnamed, or the named temporary file): this
 * is where a missing or read-only directory fails, so open every output
 * before long work. A path naming a directory fails here too. */
amp_status amp_outfile_open(amp_outfile *of, const char *path, amp_error *err);
/* 1 if of writes straight to a device, FIFO or descriptor: nothing to
 * rename, and what is written cannot be taken back. */
int amp_outfile_direct(const amp_outfile *of);
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
/* Commit in the two steps that a set of outputs needs to appear together:
 * finish every one (data on disk; a named temporary file closed, an
 * unnamed one left open and nameless), then place them all with
 * amp_outfile_place_all, then amp_outfile_abort each (which only frees a
 * placed one). A failure before the placing leaves nothing: abort removes
 * the temporary names. finish closes a direct output (a late write error
 * shows there). */
amp_status amp_outfile_finish(amp_outfile *of, amp_error *err);
/* Give n finished outputs their final names in order: first every
 * unnamed one a temporary name beside its final one (a failure there
 * places none), then the renames, with SIGINT, SIGTERM and SIGHUP held
 * back meanwhile (so a signal finds all of them placed or, through
 * amp_outfile_cleanup_on_signals, none), then a sync of each directory.
 * Only a failed rename itself can leave some placed (the message says how
 * many); SIGKILL or a crash in the renames (microseconds a file) can too,
 * and one in the naming leaves temporary names. Direct outputs and NULL
 * entries are skipped. */
amp_status amp_outfile_place_all(amp_outfile *const *ofs, size_t n, amp_error *err);

/* Refuse (AMP_ERR_USAGE, naming both) where two of n paths name the same
 * file: by device and inode where it exists, by the path with symlinks
 * and the directory resolved where it does not. what[i] names each in the
 * message ("--json", "the input"). "-" is standard output, or standard
 * input where is_input[i] is set (is_input may be NULL). A character
 * device may appear more than once (two reports to /dev/null); a FIFO
 * may not. */
amp_status amp_outfile_check_distinct(const char *const *paths, const char *const *what,
                                      const int *is_input, size_t n, amp_error *err);

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
