/* GPU presence and a kernel round trip; skipped without CUDA or a device. */
#include <config.h>

#include "tap.h"
#ifdef AMP_HAVE_CUDA
#include "cuda/amp_cuda.h"
#endif

int main(void)
{
#ifndef AMP_HAVE_CUDA
    plan_skip_all("built without CUDA");
#else
    amp_cuda_device dev[16];
    int count = 0;
    amp_error err = {0};
    amp_status rc = amp_cuda_list_devices(dev, 16, &count, &err);
    if (rc == AMP_ERR_NO_DEVICE)
        plan_skip_all("no CUDA device");
    is_int(rc, AMP_OK, "device query succeeds");
    ok(count > 0, "%d device%s found", count, count == 1 ? "" : "s");
    for (int i = 0; i < count && i < 16; i++) {
        ok(dev[i].sm_count > 0 && dev[i].total_memory > 0 && dev[i].free_memory <= dev[i].total_memory,
           "GPU %d (%s): %d SMs, sane memory figures", i, dev[i].name, dev[i].sm_count);
        amp_error e = {0};
        rc = amp_cuda_selftest(i, &e);
        if (!ok(rc == AMP_OK, "GPU %d runs this build's kernel image", i))
            diag("%s", e.msg);
    }
    return done_testing();
#endif
}
