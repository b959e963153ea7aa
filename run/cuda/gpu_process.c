/* What a process must settle before CUDA starts in it (gpu_run.h). */
#include <config.h>

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_run.h"

unsigned amp_gpu_count_unstarted(void)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    unsigned n = 0;
    if (v != NULL) {
        /* CUDA stops at the first entry it cannot use; "-1" hides every
         * GPU. An upper bound is enough here. */
        if (*v == '-')
            return 0;
        for (const char *p = v; *p; p++)
            if (*p != ',' && (p == v || p[-1] == ','))
                n++;
        return n;
    }
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (d == NULL)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

int amp_gpu_prepare_process(unsigned gpus)
{
    if (gpus < 2 || getenv("CUDA_MODULE_LOADING") != NULL)
        return 0;
    return setenv("CUDA_MODULE_LOADING", "EAGER", 0) == 0;
}

int amp_gpu_same_device(const unsigned char (*uuid)[16], unsigned n, unsigned *i, unsigned *j)
{
    for (unsigned b = 1; b < n; b++)
        for (unsigned a = 0; a < b; a++)
            if (memcmp(uuid[a], uuid[b], 16) == 0) {
                *i = a;
                *j = b;
                return 1;
            }
    return 0;
}
