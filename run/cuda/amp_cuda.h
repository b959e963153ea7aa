/* C interface to amped's CUDA code. The .cu files export only these
 * extern "C" functions, so everything else in run/ stays plain C. */
#ifndef AMP_CUDA_H
#define AMP_CUDA_H

#include <stddef.h>

#include "amp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amp_cuda_device {
    int ordinal;
    char name[256];
    int cc_major, cc_minor;      /* compute capability */
    int sm_count;
    size_t total_memory, free_memory;
    int pci_bus, pci_device;
} amp_cuda_device;

/* Up to max devices into out; *count gets how many there are. Fails with
 * AMP_ERR_NO_DEVICE when the runtime finds none (or no driver). */
amp_status amp_cuda_list_devices(amp_cuda_device *out, int max, int *count, amp_error *err);

/* Runtime and driver versions as "13.0 (driver 13.0)". */
void amp_cuda_version_string(char *buf, size_t n);

/* Run a trivial kernel on device ordinal and check its result: proves the
 * build's machine code (or PTX) runs on this GPU. */
amp_status amp_cuda_selftest(int ordinal, amp_error *err);

#ifdef __cplusplus
}
#endif
#endif
