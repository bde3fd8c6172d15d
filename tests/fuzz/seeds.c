/*
 * seeds.c - writes the fuzz targets' seed corpora (build time) from the
 * project's test traces: fuzz_seeds OUTDIR TRACE...  For each trace small
 * enough (64 KiB uncompressed): its text as it is (json/), what loom saves
 * of it as JSON and as pftrace (json/, pftrace/), the gzip target's inputs
 * (gzip/: a mode byte, then the text), and for the report and merge
 * targets every trace and the traces named rank*.json joined by
 * LOOM_FUZZ_SEP (report/, merge/).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include <loom/loom.h>

#include "fuzz.h"

#define MAX_SEED (64 * 1024)

static const char *outdir;

static void put(const char *sub, const char *name, const void *a, size_t na, const void *b,
                size_t nb) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", outdir, sub);
  if (mkdir(p, 0755) != 0 && errno != EEXIST) perror(p), exit(1);
  snprintf(p, sizeof p, "%s/%s/%s", outdir, sub, name);
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(a, 1, na, f) != na || (nb && fwrite(b, 1, nb, f) != nb) || fclose(f))
    perror(p), exit(1);
}

static char *slurp(const char *path, size_t *n) {
  gzFile f = gzopen(path, "rb");
  if (!f) perror(path), exit(1);
  char *b = malloc(MAX_SEED + 1);
  int k = gzread(f, b, MAX_SEED + 1);
  gzclose(f);
  if (k < 0) fprintf(stderr, "%s: unreadable\n", path), exit(1);
  *n = (size_t)k;
  return b;
}

/* A JSON file of tests/data that is not a trace (HTA's expected figures)
 * stays a seed as it is; only traces are saved again. */
static void saved(const char *path, const char *base) {
  loom_trace *t = NULL;
  loom_status st = loom_trace_load(path, &t);
  if (st != LOOM_OK) {
    if (st == LOOM_EFORMAT) return;
    fprintf(stderr, "fuzz_seeds: %s: %s\n", path, loom_last_error());
    exit(1);
  }
  const char *ext[] = {".json", ".pftrace"}, *sub[] = {"json", "pftrace"};
  for (int i = 0; i < 2; i++) {
    char nm[512];
    snprintf(nm, sizeof nm, "saved%s", ext[i]);
    const char *tmp = loom_fuzz_path(nm);
    if (loom_trace_save(t, tmp) != LOOM_OK) fprintf(stderr, "%s\n", loom_last_error()), exit(1);
    size_t n;
    char *s = loom_fuzz_read(tmp, &n);
    snprintf(nm, sizeof nm, "loom-%s%s", base, ext[i]);
    put(sub[i], nm, s, n, NULL, 0);
    put("report", nm, s, n, NULL, 0);
    free(s);
  }
  loom_trace_free(t);
}

int main(int argc, char **argv) {
  if (argc < 3) return fprintf(stderr, "usage: fuzz_seeds OUTDIR TRACE...\n"), 2;
  outdir = argv[1];
  if (mkdir(outdir, 0755) != 0 && errno != EEXIST) return perror(outdir), 1;
  char *ranks = NULL;
  size_t nranks = 0, written = 0;
  for (int i = 2; i < argc; i++) {
    size_t n;
    char *s = slurp(argv[i], &n);
    if (n > MAX_SEED) {
      free(s);
      continue;
    }
    char *dup = strdup(argv[i]), *base = basename(dup);
    char *gz = strstr(base, ".gz");
    if (gz) *gz = 0;
    put("json", base, s, n, NULL, 0);
    put("report", base, s, n, NULL, 0);
    put("merge", base, s, n, NULL, 0);
    const unsigned char modes[] = {0x06, 0x09, 0xa0, 0x54};
    for (size_t m = 0; m < sizeof modes; m++) {
      char nm[512];
      snprintf(nm, sizeof nm, "%s.mode%02x", base, modes[m]);
      put("gzip", nm, &modes[m], 1, s, n);
    }
    saved(argv[i], base);
    if (!strncmp(base, "rank", 4)) {
      ranks = realloc(ranks, nranks + n + sizeof LOOM_FUZZ_SEP);
      if (nranks) memcpy(ranks + nranks, LOOM_FUZZ_SEP, sizeof LOOM_FUZZ_SEP - 1),
          nranks += sizeof LOOM_FUZZ_SEP - 1;
      memcpy(ranks + nranks, s, n);
      nranks += n;
    }
    free(dup);
    free(s);
    written++;
  }
  if (nranks) {
    put("report", "ranks-joined", ranks, nranks, NULL, 0);
    put("merge", "ranks-joined", ranks, nranks, NULL, 0);
  }
  free(ranks);
  printf("fuzz_seeds: %zu traces into %s\n", written, outdir);
  return written ? 0 : 1;
}
