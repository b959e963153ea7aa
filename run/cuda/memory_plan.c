/* How a GPU holds its part of the tensor, from sizes alone (gpu_run.h):
 * plain C without CUDA, so that the choice --memory auto makes is tested
 * on machines without a GPU. */
#include <config.h>

#include "gpu_run.h"

const char *amp_memory_name(int memory)
{
    static const char *const names[] = {"auto", "resident", "stream", "compressed", "remap"};
    return memory >= 0 && memory < (int)(sizeof names / sizeof names[0]) ? names[memory] : "?";
}

uint64_t amp_memory_tensor_bytes(int memory, unsigned nmodes, uint64_t nnz, size_t value_size)
{
    /* The +8s: each array is allocated a word longer (the kernels' last
     * loads may run a word past the end). */
    const uint64_t copy = nnz * (8 + value_size) + 16, positions = nnz * 4 + 8;
    if (memory == AMP_MEMORY_RESIDENT)
        return nmodes * copy;
    if (memory == AMP_MEMORY_REMAP)
        return 2 * copy + nmodes * positions;
    return 0;
}

int amp_memory_remap_skipped(int asked, const amp_memory_sizes *s)
{
    amp_memory_sizes with = *s;
    with.remap_in_file = 1;
    return asked == AMP_MEMORY_AUTO && !s->remap_in_file &&
           amp_memory_choose(asked, &with) == AMP_MEMORY_REMAP;
}

int amp_memory_choose(int asked, const amp_memory_sizes *s)
{
    if (asked != AMP_MEMORY_AUTO)
        return asked;
    if (s->resident <= s->avail)
        return AMP_MEMORY_RESIDENT;
    if (s->remap > 0 && s->remap <= s->avail && s->remap_in_file)
        return AMP_MEMORY_REMAP;
    return AMP_MEMORY_STREAM;
}
