/* What a process settles before CUDA starts (run/cuda/gpu_process.c): the
 * GPUs it would see, counted without CUDA, and eager kernel loading asked
 * for where it will drive several GPUs (their threads can deadlock on
 * CUDA's lazy loader otherwise), never over the user's own choice. Needs
 * no GPU. */
#include <config.h>

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_run.h"
#include "tap.h"

static unsigned count_with(const char *visible)
{
    setenv("CUDA_VISIBLE_DEVICES", visible, 1);
    unsigned n = amp_gpu_count_unstarted();
    unsetenv("CUDA_VISIBLE_DEVICES");
    return n;
}

static int loading_is(const char *want)
{
    const char *v = getenv("CUDA_MODULE_LOADING");
    return want == NULL ? v == NULL : v != NULL && strcmp(v, want) == 0;
}

int main(void)
{
    plan(14);
    is_int(count_with("0,1"), 2, "CUDA_VISIBLE_DEVICES=0,1: 2 GPUs");
    is_int(count_with("3"), 1, "CUDA_VISIBLE_DEVICES=3: 1 GPU");
    is_int(count_with(""), 0, "CUDA_VISIBLE_DEVICES empty: none");
    is_int(count_with("-1"), 0, "CUDA_VISIBLE_DEVICES=-1: none");
    is_int(count_with("GPU-8f1c,GPU-77aa,GPU-0b3d"), 3, "three UUIDs: 3 GPUs");
    is_int(count_with("0,,1"), 2, "an empty entry counts for nothing");
    /* Unset: the driver's own list, absent on a machine without one. */
    unsetenv("CUDA_VISIBLE_DEVICES");
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    unsigned want = 0;
    if (d != NULL) {
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            want += e->d_name[0] != '.';
        closedir(d);
    }
    is_int(amp_gpu_count_unstarted(), want, "unset: the driver's GPUs (%u here)", want);

    unsetenv("CUDA_MODULE_LOADING");
    is_int(amp_gpu_prepare_process(0), 0, "the CPU: nothing asked");
    is_int(amp_gpu_prepare_process(1), 0, "one GPU: nothing asked");
    ok(loading_is(NULL), "... and CUDA_MODULE_LOADING left unset");
    is_int(amp_gpu_prepare_process(2), 1, "two GPUs: eager loading asked for");
    ok(loading_is("EAGER"), "... CUDA_MODULE_LOADING=EAGER");
    setenv("CUDA_MODULE_LOADING", "LAZY", 1);
    is_int(amp_gpu_prepare_process(4), 0, "the user's CUDA_MODULE_LOADING=LAZY: kept");
    ok(loading_is("LAZY"), "... still LAZY");
    return done_testing();
}
