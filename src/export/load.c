/*
 * load.c - the table of formats (formats.h), loom_trace_load, which detects
 * a trace file's format from its first bytes and hands it to that format's
 * reader, loom_trace_save, which picks the writer by the name's ending, and
 * the readers' mapped input (input.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/base.h"
#include "export/export.h"
#include "export/formats.h"
#include "export/input.h"
#include "export/pipe.h"
#include "trace/trace.h"
#include "util/util.h"

const uint8_t *loom__input_map(gzFile f, const char *path, size_t *len, uint64_t *size) {
  const uint8_t *map = NULL;
  *len = 0;
  if (size) *size = 0;
  int fd = open(path, O_RDONLY);
  struct stat sb;
  if (fd < 0) return NULL;
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
    if (size) *size = (uint64_t)sb.st_size;
    void *m = gzdirect(f) && sb.st_size > 0
                  ? mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
                  : MAP_FAILED;
    if (m != MAP_FAILED) {
      map = m;
      *len = (size_t)sb.st_size;
      madvise(m, *len, MADV_SEQUENTIAL);
    }
  }
  close(fd);
  return map;
}

void loom__input_drop(const uint8_t *map, uint64_t *dropped, uint64_t offset) {
  if (offset < *dropped + (4u << 20)) return;
  uint64_t upto = (offset - (1u << 20)) & ~(uint64_t)0xfffff;
  madvise((void *)(map + *dropped), (size_t)(upto - *dropped), MADV_DONTNEED);
  *dropped = upto;
}

static loom_status write_json(const loom_trace *t, const char *path) {
  return loom__write_chrome_json(t, path, -1);
}

static loom_status write_json_gz(const loom_trace *t, const char *path) {
  return loom__write_chrome_json(t, path, 1);
}

/* No ending here ends another, so a name matches one entry at most; the
 * order is the one loom__format_exts lists. */
static const loom__format formats[] = {
    {".json", loom__read_json, write_json, 1, 0},
    {".json.gz", loom__read_json, write_json_gz, 1, 1},
    {".pftrace", loom__read_pftrace, loom__write_pftrace, 0, 0},
    {".pftrace.gz", loom__read_pftrace, loom__write_pftrace_gz, 0, 1},
};
enum { FMT_JSON = 0, FMT_PFTRACE = 2 }; /* the entries whose reader a content selects */

const char loom__format_exts[] = ".json, .json.gz, .pftrace, .pftrace.gz";

const loom__format *loom__format_of(const char *path) {
  size_t n = strlen(path);
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) {
    size_t e = strlen(formats[i].ext);
    if (n >= e && !strcmp(path + n - e, formats[i].ext)) return &formats[i];
  }
  return NULL;
}

loom_status loom_trace_save(const loom_trace *t, const char *path) {
  loom__clear_error();
  if (!t || !path) return loom__fail(LOOM_EINVAL, "loom_trace_save: NULL trace or path");
  const loom__format *f = loom__format_of(path);
  if (f) return f->write(t, path);
  return loom__fail(LOOM_EUNSUPPORTED, "cannot save %s: unknown extension (supported: %s)", path,
                    loom__format_exts);
}


/* A streaming read whose sink allows it: the sinks run on a thread of their
 * own (pipe.h) while the file is read, when it is big enough to be worth
 * it.  Perfetto files only: a big JSON file is already parsed on a thread
 * of its own (json_tape.h), and a third thread on two CPUs made `loom
 * report` slower, not faster (docs/report.md, "How it works"). */
static loom_status read_with(loom__reader_fn rd, const char *path, const loom__sink *sink,
                             const loom__flow_sink *flows, loom_trace **out) {
  struct stat sb;
  loom__pipe *p = NULL;
  if (sink && sink->threaded && stat(path, &sb) == 0 && (uint64_t)sb.st_size >= loom__pipe_min)
    p = loom__pipe_new(sink, flows);
  if (!p) return rd(path, sink, flows, out);
  loom_status st = rd(path, loom__pipe_sink(p), loom__pipe_flows(p), out);
  if (loom__pipe_end(p, st == LOOM_OK ? *out : NULL) != 0 && st == LOOM_OK) {
    loom_trace_free(*out);
    *out = NULL;
    st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  }
  return st;
}

static loom_status load(const char *path, const loom__sink *sink, const loom__flow_sink *flows,
                        loom_trace **out) {
  loom__clear_error();
  if (!path || !out) return loom__fail(LOOM_EINVAL, "loom_trace_load: NULL path or out");
  *out = NULL;
  /* gzread passes uncompressed files through, so this sees the content. */
  gzFile f = gzopen(path, "rb");
  if (!f) return loom__fail(LOOM_EIO, "cannot open %s: %s", path, strerror(errno));
  unsigned char head[256];
  int n = gzread(f, head, sizeof head);
  gzclose(f);
  if (n <= 0) return loom__fail(LOOM_EFORMAT, "%s: empty or unreadable file", path);
  /* A Perfetto trace starts with field 1 (packet), length-delimited: 0x0a,
   * which is also a newline; its length byte may be '{' or '['. JSON text
   * never holds a control byte other than whitespace, and a packet's tags
   * and lengths always do in practice, so one decides. */
  int binary = 0, i = 0;
  for (int k = 0; k < n && !binary; k++)
    binary = head[k] < 0x20 && head[k] != '\n' && head[k] != '\r' && head[k] != '\t';
  if (head[0] == 0x0a && binary)
    return read_with(formats[FMT_PFTRACE].read, path, sink, flows, out);
  while (i < n && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t' ||
                   head[i] == 0xEF || head[i] == 0xBB || head[i] == 0xBF))
    i++;
  if (i < n && (head[i] == '{' || head[i] == '['))
    return formats[FMT_JSON].read(path, sink, flows, out);
  if (head[0] == 0x0a) return read_with(formats[FMT_PFTRACE].read, path, sink, flows, out);
  return loom__fail(LOOM_EFORMAT, "%s: not a trace loom can read (expected Chrome "
                    "JSON, gzip-compressed JSON or Perfetto protobuf) at byte offset 0", path);
}

loom_status loom_trace_load(const char *path, loom_trace **out) {
  return load(path, NULL, NULL, out);
}

loom_status loom__trace_stream(const char *path, const loom__sink *sink, loom_trace **meta) {
  return load(path, sink, NULL, meta);
}

loom_status loom__trace_stream_flows(const char *path, const loom__sink *sink,
                                     const loom__flow_sink *flows, loom_trace **meta) {
  return load(path, sink, flows, meta);
}
