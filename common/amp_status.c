#include <config.h>

#include <stdio.h>
#include <string.h>

#include "amp_error.h"

const char *amp_strerror(amp_status status)
{
    switch (status) {
    case AMP_OK:              return "success";
    case AMP_ERR_USAGE:       return "invalid argument";
    case AMP_ERR_NOMEM:       return "out of memory";
    case AMP_ERR_IO:          return "input/output error";
    case AMP_ERR_PARSE:       return "malformed input";
    case AMP_ERR_RANGE:       return "number out of range";
    case AMP_ERR_FORMAT:      return "unknown or unsupported format";
    case AMP_ERR_CORRUPT:     return "corrupt data";
    case AMP_ERR_CHECKSUM:    return "checksum mismatch";
    case AMP_ERR_VERSION:     return "unsupported format version";
    case AMP_ERR_DUPLICATE:   return "duplicate coordinates";
    case AMP_ERR_EMPTY:       return "no nonzeros";
    case AMP_ERR_CUDA:        return "CUDA error";
    case AMP_ERR_NO_DEVICE:   return "no usable GPU";
    case AMP_ERR_UNSUPPORTED: return "not supported by this build";
    case AMP_ERR_INTERNAL:    return "internal error (a bug in amped)";
    case AMP_ERR_TRUNCATED:   return "file truncated";
    case AMP_ERR_PEER:        return "another process of the run failed";
    }
    return "unknown status code";
}

amp_status amp_error_vset(amp_error *err, amp_status status, const char *src_file,
                          int src_line, const char *fmt, va_list ap)
{
    if (err == NULL || err->status != AMP_OK)
        return status;
    err->status = status;
    err->src_file = src_file;
    err->src_line = src_line;
    if (fmt != NULL)
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    else
        snprintf(err->msg, sizeof err->msg, "%s", amp_strerror(status));
    return status;
}

amp_status amp_error_set(amp_error *err, amp_status status, const char *src_file,
                         int src_line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    amp_status rc = amp_error_vset(err, status, src_file, src_line, fmt, ap);
    va_end(ap);
    return rc;
}

void amp_error_clear(amp_error *err)
{
    if (err != NULL)
        memset(err, 0, sizeof *err);
}

void amp_error_first(amp_error *err, int *failed, amp_status status, const amp_error *mine)
{
#pragma omp critical(amp_error_first)
    {
        if (!*failed)
            amp_error_set(err, status, mine->src_file, mine->src_line, "%s",
                          mine->msg[0] ? mine->msg : amp_strerror(status));
        *failed = 1;
    }
}

const char *amp_error_message(const amp_error *err)
{
    if (err == NULL)
        return amp_strerror(AMP_ERR_INTERNAL);
    if (err->msg[0] != '\0')
        return err->msg;
    return amp_strerror(err->status);
}
