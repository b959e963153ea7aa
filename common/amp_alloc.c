#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "amp_alloc.h"

const char *amp_format_bytes(char *buf, size_t n, uint64_t bytes)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, n, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, unit[u]);
    return buf;
}

static amp_status nomem(amp_error *err, size_t bytes, const char *what)
{
    char b[32];
    return AMP_FAIL(err, AMP_ERR_NOMEM, "out of memory allocating %s (%zu bytes) for %s",
                    amp_format_bytes(b, sizeof b, bytes), bytes, what);
}

void *amp_alloc(size_t bytes, const char *what, amp_error *err)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 1;
    if (posix_memalign(&p, AMP_CACHE_LINE, bytes) != 0) {
        nomem(err, bytes, what);
        return NULL;
    }
    return p;
}

void *amp_calloc(size_t count, size_t size, const char *what, amp_error *err)
{
    size_t bytes = 0;
    if (amp_mul_size(count, size, &bytes, err) != AMP_OK)
        return NULL;
    void *p = amp_alloc(bytes, what, err);
    if (p != NULL)
        memset(p, 0, bytes);
    return p;
}

void amp_free(void *p) { free(p); }

void *amp_huge_alloc(size_t bytes, const char *what, amp_error *err)
{
    if (bytes == 0)
        bytes = 1;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        nomem(err, bytes, what);
        return NULL;
    }
#if defined(HAVE_MADVISE) && defined(MADV_HUGEPAGE)
    /* Advice only: a kernel without THP keeps working with small pages. */
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

void *amp_huge_realloc(void *p, size_t old_bytes, size_t new_bytes, const char *what,
                       amp_error *err)
{
    if (p == NULL)
        return amp_huge_alloc(new_bytes, what, err);
    if (new_bytes == 0)
        new_bytes = 1;
    if (old_bytes == 0)
        old_bytes = 1;
    void *q = mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) {
        nomem(err, new_bytes, what);
        return NULL;
    }
#if defined(HAVE_MADVISE) && defined(MADV_HUGEPAGE)
    (void)madvise(q, new_bytes, MADV_HUGEPAGE);
#endif
    return q;
}

void amp_huge_free(void *p, size_t bytes)
{
    if (p != NULL)
        munmap(p, bytes ? bytes : 1);
}

amp_status amp_mul_size(size_t a, size_t b, size_t *out, amp_error *err)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return AMP_FAIL(err, AMP_ERR_RANGE, "size overflow: %zu x %zu bytes", a, b);
    *out = r;
    return AMP_OK;
}

uint64_t amp_host_memory_available(void)
{
    FILE *fp = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kib = 0;
    while (fp != NULL && fgets(line, sizeof line, fp) != NULL)
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    if (fp != NULL)
        fclose(fp);
    if (kib > 0)
        return (uint64_t)kib << 10;
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : UINT64_MAX;
}
