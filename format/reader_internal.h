/* The open-file state shared by reader.c and section_read.c. */
#ifndef AMP_READER_INTERNAL_H
#define AMP_READER_INTERNAL_H

#include "format_internal.h"

struct amp_file {
    char *path;
    int fd;
    amp_file_info info;
    uint64_t dir_hash;
    amp_section *secs;                          /* info.nsections directory entries */
    amp_meta meta;
    char text[3 * (AMP_META_TEXT_MAX + 1)];     /* META's strings */
    amp_mode_layout layouts[AMP_MAX_MODES];
    amp_mode_layout *layout_ptrs[AMP_MAX_MODES];
    uint32_t *chunk_index[AMP_MAX_MODES];       /* [first_chunk + seq] -> section */
    uint32_t *remap_index[AMP_MAX_MODES];       /* the same for remap streams, or UINT32_MAX */
    size_t relabel_at[AMP_MAX_MODES];
    size_t fiber_at[AMP_MAX_MODES];             /* FIBER entry, or info.nsections: none */
};

/* pread all n bytes or fail; what names the part for messages. */
amp_status amp_pread_full(const amp_file *f, void *buf, size_t n, uint64_t offset,
                          const char *what, amp_error *err);

#endif
