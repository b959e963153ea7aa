/* Status codes shared by every amped library.
 *
 * Every fallible function returns an amp_status; AMP_OK is zero so that
 * "if (rc)" reads as "if it failed". The numbers are part of the public
 * interface once released: add new codes at the end, never renumber. */
#ifndef AMP_STATUS_H
#define AMP_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum amp_status {
    AMP_OK = 0,
    AMP_ERR_USAGE = 1,       /* an argument or option is invalid */
    AMP_ERR_NOMEM = 2,       /* an allocation failed */
    AMP_ERR_IO = 3,          /* open, read, write, sync or rename failed */
    AMP_ERR_PARSE = 4,       /* malformed input text or structure */
    AMP_ERR_RANGE = 5,       /* a number is outside its allowed range */
    AMP_ERR_FORMAT = 6,      /* unknown or unsupported input format */
    AMP_ERR_CORRUPT = 7,     /* a structure is inconsistent (sizes, offsets) */
    AMP_ERR_CHECKSUM = 8,    /* a stored checksum does not match the data */
    AMP_ERR_VERSION = 9,     /* a format version this build cannot read */
    AMP_ERR_DUPLICATE = 10,  /* duplicate coordinates where none are allowed */
    AMP_ERR_EMPTY = 11,      /* the input holds no nonzeros */
    AMP_ERR_CUDA = 12,       /* a CUDA runtime or library call failed */
    AMP_ERR_NO_DEVICE = 13,  /* no usable GPU */
    AMP_ERR_UNSUPPORTED = 14,/* valid request this build does not support */
    AMP_ERR_INTERNAL = 15,   /* a broken invariant: a bug in amped */
    AMP_ERR_TRUNCATED = 16,  /* a file ends before the data it declares */
    AMP_ERR_PEER = 17        /* another process of the run failed, or MPI did */
} amp_status;

/* A short, static, human-readable description of a status code.
 * Never returns NULL, also for codes this build does not know. */
const char *amp_strerror(amp_status status);

#ifdef __cplusplus
}
#endif
#endif
