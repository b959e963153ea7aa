#include <config.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "write_queue.h"

struct amp_write_item {
    amp_write_item *next;
    uint64_t at;
    size_t size;
    max_align_t data[];
};

struct amp_write_queue {
    amp_outfile *of;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work;      /* an item arrived, or closing */
    pthread_cond_t changed;   /* an item was written, or amp_wq_wake */
    amp_write_item *head, *tail;
    uint64_t held;            /* bytes of items allocated and not yet written */
    int closing;
    int discard;              /* drop items instead of writing them */
    amp_status rc;            /* the first write error; later items are dropped */
    amp_error err;
};

static void *write_loop(void *arg)
{
    amp_write_queue *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (q->head == NULL && !q->closing)
            pthread_cond_wait(&q->work, &q->mu);
        amp_write_item *it = q->head;
        if (it == NULL)
            break;
        q->head = it->next;
        if (q->head == NULL)
            q->tail = NULL;
        amp_status rc = q->rc;
        int discard = q->discard;
        pthread_mutex_unlock(&q->mu);
        amp_error err = {0};
        if (rc == AMP_OK && !discard) {
            rc = amp_outfile_pwrite(q->of, it->data, it->size, it->at, &err);
            /* Items come in file order, so everything below here is written. */
            if (rc == AMP_OK)
                amp_outfile_flush_upto(q->of, it->at + it->size);
        }
        size_t size = it->size;
        free(it);
        pthread_mutex_lock(&q->mu);
        if (rc != AMP_OK && q->rc == AMP_OK) {
            q->rc = rc;
            q->err = err;
        }
        q->held -= size;
        pthread_cond_broadcast(&q->changed);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

amp_status amp_wq_start(amp_write_queue **qp, amp_outfile *of, amp_error *err)
{
    *qp = NULL;
    amp_write_queue *q = calloc(1, sizeof *q);
    if (q == NULL)
        return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory");
    q->of = of;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->changed, NULL);
    if (pthread_create(&q->thread, NULL, write_loop, q) != 0) {
        pthread_cond_destroy(&q->changed);
        pthread_cond_destroy(&q->work);
        pthread_mutex_destroy(&q->mu);
        free(q);
        return AMP_FAIL(err, AMP_ERR_NOMEM, "%s: cannot start the writing thread",
                        of->final_path);
    }
    *qp = q;
    return AMP_OK;
}

amp_write_item *amp_wq_item(amp_write_queue *q, size_t n)
{
    amp_write_item *it = malloc(sizeof *it + (n ? n : 1));
    if (it == NULL)
        return NULL;
    it->next = NULL;
    it->at = 0;
    it->size = n;
    pthread_mutex_lock(&q->mu);
    q->held += n;
    pthread_mutex_unlock(&q->mu);
    return it;
}

void *amp_wq_data(amp_write_item *it)
{
    return it->data;
}

void amp_wq_discard(amp_write_queue *q, amp_write_item *it)
{
    if (it == NULL)
        return;
    pthread_mutex_lock(&q->mu);
    q->held -= it->size;
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->mu);
    free(it);
}

amp_status amp_wq_submit(amp_write_queue *q, amp_write_item *it, uint64_t offset,
                         amp_error *err)
{
    it->at = offset;
    it->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->tail != NULL)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    amp_status rc = q->rc;
    if (rc != AMP_OK)
        amp_error_set(err, rc, q->err.src_file, q->err.src_line, "%s", q->err.msg);
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void amp_wq_wait(amp_write_queue *q, int (*ready)(void *ctx, uint64_t held), void *ctx)
{
    pthread_mutex_lock(&q->mu);
    while (!ready(ctx, q->held))
        pthread_cond_wait(&q->changed, &q->mu);
    pthread_mutex_unlock(&q->mu);
}

void amp_wq_wake(amp_write_queue *q)
{
    pthread_mutex_lock(&q->mu);
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->mu);
}

static amp_status stop(amp_write_queue *q, int discard, amp_error *err)
{
    if (q == NULL)
        return AMP_OK;
    pthread_mutex_lock(&q->mu);
    q->closing = 1;
    q->discard = discard;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
    amp_status rc = q->rc;
    if (rc != AMP_OK)
        amp_error_set(err, rc, q->err.src_file, q->err.src_line, "%s", q->err.msg);
    pthread_cond_destroy(&q->changed);
    pthread_cond_destroy(&q->work);
    pthread_mutex_destroy(&q->mu);
    free(q);
    return rc;
}

amp_status amp_wq_finish(amp_write_queue *q, amp_error *err)
{
    return stop(q, 0, err);
}

void amp_wq_abandon(amp_write_queue *q)
{
    (void)stop(q, 1, NULL);
}
