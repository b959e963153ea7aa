/* The writer's file I/O on a thread of its own.
 *
 * Sections are handed over as heap copies, in file order, and one thread
 * writes them (pwrite, then writeback started every 64 MiB) while the
 * callers go on compressing, or building the next mode copy. Writing from
 * the compressing threads themselves made them queue on the file's lock
 * and copy into its page cache one at a time: at 16 threads that was most
 * of the chunk phase (bench/RESULTS.md, issue 4). Only format/ includes
 * this. */
#ifndef AMP_WRITE_QUEUE_H
#define AMP_WRITE_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "amp_error.h"
#include "amp_outfile.h"

typedef struct amp_write_queue amp_write_queue;
typedef struct amp_write_item amp_write_item;

/* Start the thread that writes to of (which must outlive the queue). */
amp_status amp_wq_start(amp_write_queue **q, amp_outfile *of, amp_error *err);

/* A buffer of n bytes for one section, counted as held until written.
 * NULL when out of memory. */
amp_write_item *amp_wq_item(amp_write_queue *q, size_t n);
void *amp_wq_data(amp_write_item *it);
/* Give up an item that will not be submitted. */
void amp_wq_discard(amp_write_queue *q, amp_write_item *it);

/* Queue an item for writing at offset; items must come in offset order.
 * Returns the first write error met so far (the item is taken either
 * way). */
amp_status amp_wq_submit(amp_write_queue *q, amp_write_item *it, uint64_t offset,
                         amp_error *err);

/* Sleep until ready(ctx, held) holds, held being the bytes of items
 * allocated and not yet written.
 * ready runs under the queue's lock and is asked again whenever an item
 * has been written or amp_wq_wake is called; a caller that changes what
 * else ready reads calls amp_wq_wake after the change. */
void amp_wq_wait(amp_write_queue *q, int (*ready)(void *ctx, uint64_t held), void *ctx);
void amp_wq_wake(amp_write_queue *q);

/* Write everything queued, stop the thread and free the queue (NULL is
 * fine); returns the first write error. */
amp_status amp_wq_finish(amp_write_queue *q, amp_error *err);
/* The same for a file being given up: what is still queued is dropped,
 * not written. */
void amp_wq_abandon(amp_write_queue *q);

#endif
