/*
 * input.h - a trace file read once from start to end, as the readers read
 * it: an uncompressed file is mapped (no copy through read() and gzread's
 * buffers, a fifth of the time on big traces), and the pages already read
 * leave the RSS as the reader goes on.  Implemented in load.c.
 */
#ifndef LOOM_INPUT_H
#define LOOM_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

/* The file at path mapped when f (gzopen'ed on it) passes it through
 * uncompressed; NULL otherwise or when mapping fails.  *len: the mapping's
 * length.  *size (may be NULL): the file's size on disk (0 for a file that
 * is not a regular one). */
const uint8_t *loom__input_map(gzFile f, const char *path, size_t *len, uint64_t *size);
/* Read up to offset: once that is 4 MiB past *dropped, the pages up to
 * 1 MiB before it are dropped from the RSS (the file keeps them). */
void loom__input_drop(const uint8_t *map, uint64_t *dropped, uint64_t offset);

#endif
