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
    plan(18);
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

    unsigned char u[4][16];
    memset(u, 0, sizeof u);
    for (int k = 0; k < 4; k++)
        u[k][15] = (unsigned char)k;   /* four devices, differing in the last byte */
    unsigned i = 9, j = 9;
    is_int(amp_gpu_same_device((const unsigned char(*)[16])u, 4, &i, &j), 0,
           "four GPUs, four UUIDs: none taken twice");
    u[3][15] = 1;   /* GPU 3 is GPU 1 again */
    int same = amp_gpu_same_device((const unsigned char(*)[16])u, 4, &i, &j);
    ok(same && i == 1 && j == 3, "GPU 3 the same device as GPU 1: found (%u, %u)", i, j);
    u[0][0] = 0xff;
    u[2][0] = 0xff;
    u[2][15] = 0;   /* and GPU 2 is GPU 0: the first pair by the later GPU */
    same = amp_gpu_same_device((const unsigned char(*)[16])u, 4, &i, &j);
    ok(same && i == 0 && j == 2, "two pairs: the first found (%u, %u)", i, j);
    is_int(amp_gpu_same_device((const unsigned char(*)[16])u, 1, &i, &j), 0,
           "one GPU: nothing to compare");
    return done_testing();
}
