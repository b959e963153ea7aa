/* Device discovery and a self-test kernel.
 *
 * Thread mapping of the self-test: one thread per element of a small
 * array, grid-stride; it writes i*i+1, so a wrong or missing kernel image
 * ("no kernel image is available for execution on the device") is caught
 * before any real work is planned. Bytes moved: 8 per element. */
#include <config.h>

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "amp_cuda.h"
#include "gpu_internal.h"

extern "C" amp_status amp_cuda_device_count(int *count, amp_error *err)
{
    int n = 0;
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver) {
        /* The runtime's own words ("CUDA driver version is insufficient
         * for CUDA runtime version") also cover a machine with no driver
         * at all, where the driver version reads 0. */
        int rt = 0, drv = 0;
        (void)cudaGetLastError();
        (void)cudaRuntimeGetVersion(&rt);
        if (cudaDriverGetVersion(&drv) != cudaSuccess || drv == 0)
            return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "no CUDA device found: there is no "
                            "NVIDIA driver on this machine");
        return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "no CUDA device found: the NVIDIA driver "
                        "supports CUDA %d.%d, older than the %d.%d this build needs (update the "
                        "driver)", drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    }
    if (e == cudaErrorNoDevice || n == 0) {
        (void)cudaGetLastError();
        return AMP_FAIL(err, AMP_ERR_NO_DEVICE, "no CUDA device found (%s)",
                        e == cudaSuccess ? "the runtime reports 0 devices"
                                         : cudaGetErrorString(e));
    }
    if (e != cudaSuccess)
        return CUDA_FAIL(err, e, "cudaGetDeviceCount");
    *count = n;
    return AMP_OK;
}

extern "C" amp_status amp_cuda_describe_device(int i, amp_cuda_device *out, amp_error *err)
{
    cudaDeviceProp p;
    CUDA_TRY(cudaGetDeviceProperties(&p, i), err);
    CUDA_TRY(cudaSetDevice(i), err);
    size_t free_b, total_b;
    CUDA_TRY(cudaMemGetInfo(&free_b, &total_b), err);
    memset(out, 0, sizeof *out);
    out->ordinal = i;
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sm_count = p.multiProcessorCount;
    out->total_memory = total_b;
    out->free_memory = free_b;
    out->pci_bus = p.pciBusID;
    out->pci_device = p.pciDeviceID;
    memcpy(out->uuid, p.uuid.bytes, sizeof out->uuid);
    return AMP_OK;
}

extern "C" amp_status amp_cuda_list_devices(amp_cuda_device *out, int max, int *count,
                                            amp_error *err)
{
    AMP_CHECK(amp_cuda_device_count(count, err));
    for (int i = 0; i < *count && i < max; i++)
        AMP_CHECK(amp_cuda_describe_device(i, &out[i], err));
    return AMP_OK;
}

extern "C" void amp_cuda_version_string(char *buf, size_t n)
{
    int rt = 0, drv = 0;
    (void)cudaRuntimeGetVersion(&rt);
    if (cudaDriverGetVersion(&drv) != cudaSuccess)
        drv = 0;
    if (drv)
        snprintf(buf, n, "%d.%d (driver %d.%d)", rt / 1000, rt % 1000 / 10, drv / 1000,
                 drv % 1000 / 10);
    else
        snprintf(buf, n, "%d.%d (no driver)", rt / 1000, rt % 1000 / 10);
}

__global__ static void selftest_kernel(unsigned long long *x, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = (unsigned long long)i * (unsigned long long)i + 1;
}

extern "C" amp_status amp_cuda_selftest(int ordinal, amp_error *err)
{
    const int n = 4096;
    unsigned long long host[4096];
    unsigned long long *dev = NULL;
    amp_status rc = AMP_OK;
    CUDA_TRY_GOTO(cudaSetDevice(ordinal), err, rc, done);
    CUDA_TRY_GOTO(cudaMalloc(&dev, n * sizeof *dev), err, rc, done);
    selftest_kernel<<<8, 256>>>(dev, n);
    CUDA_TRY_GOTO(cudaGetLastError(), err, rc, done);
    CUDA_TRY_GOTO(cudaMemcpy(host, dev, n * sizeof *dev, cudaMemcpyDeviceToHost), err,
                        rc, done);
    for (int i = 0; i < n; i++)
        if (host[i] != (unsigned long long)i * (unsigned long long)i + 1) {
            rc = AMP_FAIL(err, AMP_ERR_CUDA, "GPU %d self-test: element %d is %llu, expected %llu",
                          ordinal, i, host[i], (unsigned long long)i * i + 1);
            break;
        }
done:
    if (dev)
        cudaFree(dev);
    return rc;
}
