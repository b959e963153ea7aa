/* amped-prep --report: the tensor's slice-degree distribution and the
 * shards' balance as one HTML page of SVG charts. */
#ifndef AMP_PREP_REPORT_H
#define AMP_PREP_REPORT_H

#include <stdint.h>

#include "amp_build.h"
#include "amp_coo.h"
#include "amp_outfile.h"

typedef struct amp_prep_report {
    const char *input;
    unsigned nmodes;
    uint64_t nnz;
    uint64_t dims[AMP_MAX_MODES];
    const amp_degree_hist *hist;      /* nmodes */
    /* The .amp file written, or NULL output: then no shards. */
    const char *output;
    const amp_build_report *build;
    const uint64_t *shard_nnz;        /* amp_build_opts.shard_nnz */
    uint32_t shards;                  /* its stride: amp_build_opts.shards */
} amp_prep_report;

/* Write the page into of (opened before the input was read) and give it
 * its name; of is closed after, whatever the outcome. */
amp_status amp_prep_report_write(const amp_prep_report *r, amp_outfile *of, amp_error *err);

#endif
