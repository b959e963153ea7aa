/* amped-run --info and --verify: what an .amp file holds, and whether
 * every byte of it is intact. Both print to stdout (problems to stderr)
 * and return the process exit status. */
#ifndef AMP_INSPECT_H
#define AMP_INSPECT_H

int amp_inspect_info(const char *path);
int amp_inspect_verify(const char *path, int threads, int quiet);

#endif
