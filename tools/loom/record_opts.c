/*
 * record_opts.c - parses `loom record`'s options (see record_opts.h).  Each
 * option is one entry of a table: its name, whether it takes a value, and
 * the session option it becomes (if any), so an option is added with one
 * line.  Values of window options and the output are checked here, so a
 * mistake is told before the program starts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "record_opts.h"
#include "spec.h"

/* The synopsis (spec.c) on stderr; 2, the status of a wrong command line. */
static int usage(void) {
  cli_usage(stderr, cli_command("record"));
  return 2;
}

/* Options that become session options: the command-line name, the session
 * key, and the kind of value (checked here, parsed again by the core). */
enum { V_STEPS, V_SECONDS, V_SIZE, V_FACTOR };
static const struct sopt {
  const char *flag, *key;
  int kind;
} sopts[] = {
    {"--start-step", "start_step", V_STEPS}, {"--steps", "steps", V_STEPS},
    {"--delay", "delay", V_SECONDS},         {"--duration", "duration", V_SECONDS},
    {"--wait", "wait", V_STEPS},             {"--warmup", "warmup", V_STEPS},
    {"--active", "active", V_STEPS},         {"--repeat", "repeat", V_STEPS},
    {"--skip-first", "skip_first", V_STEPS},
    {"--ring", "mode=ring,ring_size", V_SIZE}, {"--slow-step", "slow_step", V_FACTOR},
};

static int add_option(record_opts *o, const char *kv) {
  size_t l = strlen(o->options);
  int k = snprintf(o->options + l, sizeof o->options - l, "%s%s", l ? "," : "", kv);
  if (k < 0 || (size_t)k >= sizeof o->options - l) {
    fprintf(stderr, "loom record: session options longer than %zu bytes\n", sizeof o->options);
    return 2;
  }
  return 0;
}

static int check_value(const struct sopt *s, const char *v) {
  char *end;
  if (s->kind == V_STEPS) {
    long long n = strtoll(v, &end, 10);
    if (end != v && !*end && n >= 0) return 0;
    fprintf(stderr, "loom record: %s takes a number of steps (0 or more), not '%s'\n", s->flag, v);
  } else if (s->kind == V_SIZE) {
    unsigned long long n = strtoull(v, &end, 10);
    if (end != v && (!*end || (strchr("kKmMgG", *end) && !end[1])) && n > 0) return 0;
    fprintf(stderr, "loom record: %s takes a size (suffix k, m or g allowed), not '%s'\n",
            s->flag, v);
  } else if (s->kind == V_FACTOR) {
    double d = strtod(v, &end);
    if (end != v && !*end && d > 1 && isfinite(d)) return 0;
    fprintf(stderr, "loom record: %s takes a factor above 1, not '%s'\n", s->flag, v);
  } else {
    double d = strtod(v, &end);
    if (end != v && !*end && d >= 0 && isfinite(d)) return 0;
    fprintf(stderr, "loom record: %s takes a number of seconds (0 or more), not '%s'\n", s->flag,
            v);
  }
  return 2;
}

static int session_flag(record_opts *o, const char *flag, const char *v) {
  for (size_t k = 0; k < sizeof sopts / sizeof sopts[0]; k++) {
    if (strcmp(flag, sopts[k].flag)) continue;
    if (check_value(&sopts[k], v)) return 2;
    char kv[512];
    snprintf(kv, sizeof kv, "%s=%s", sopts[k].key, v);
    return add_option(o, kv);
  }
  return -1;
}

int record_opts_parse(record_opts *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  o->follow = "all";
  int i = 2;
  for (; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    if (a[0] != '-') break; /* the program, without "--" */
    if (!strcmp(a, "--on-demand")) { /* records nothing until `loom trigger` asks */
      if (add_option(o, "windows=on")) return 2;
      continue;
    }
    if (!v) return usage();
    int rc;
    if (!strcmp(a, "-o")) o->out = v;
    else if (!strcmp(a, "--devices")) o->devices = v;
    else if (!strcmp(a, "--follow")) o->follow = v;
    else if (!strcmp(a, "--memory")) {
      if (strcmp(v, "host")) {
        fprintf(stderr, "loom record: --memory takes 'host' (the heap; device memory is "
                        "recorded with its runtime), not '%s'\n", v);
        return 2;
      }
      o->memory_host = 1;
    }
    else if (!strcmp(a, "--option")) {
      if (add_option(o, v)) return 2;
    } else if (!strcmp(a, "--plugin")) {
      if (o->nplugins == sizeof o->plugins / sizeof o->plugins[0]) {
        fprintf(stderr, "loom record: more than %zu --plugin options\n", o->nplugins);
        return 2;
      }
      o->plugins[o->nplugins++] = v;
    } else if ((rc = session_flag(o, a, v)) >= 0) {
      if (rc) return rc;
    } else {
      return usage();
    }
    i++;
  }
  if (i >= argc) return usage();
  o->prog = i;
  return 0;
}

/* The output with a window pattern's fields filled in as the program's
 * first file would have them, for the check. */
static void sample_name(char *out, size_t n, const char *pat) {
  static const char *const fields[] = {"{pid}", "1", "{rank}", "0", "{seq}", "1",
                                       "{program}", "program"};
  size_t l = 0;
  while (*pat && l + 1 < n) {
    size_t k = 0;
    while (k < 8 && strncmp(pat, fields[k], strlen(fields[k]))) k += 2;
    if (k < 8) {
      l += (size_t)snprintf(out + l, n - l, "%s", fields[k + 1]);
      pat += strlen(fields[k]);
    } else {
      out[l++] = *pat++;
    }
  }
  out[l < n ? l : n - 1] = 0;
}

static const char *const exts[] = {".json", ".json.gz", ".pftrace", ".pftrace.gz"};

static int known_ext(const char *out) {
  size_t n = strlen(out);
  for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
    size_t e = strlen(exts[i]);
    if (n > e && !strcmp(out + n - e, exts[i])) return 1;
  }
  return 0;
}

/* Creates and removes a file named like the temporary file the trace is
 * written to (the longest name the save needs): 0, or errno. */
static int try_create(const char *name) {
  char tmp[8192];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", name) >= sizeof tmp) return ENAMETOOLONG;
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) return errno;
  close(fd);
  unlink(tmp);
  return 0;
}

int record_opts_check_out(const char *out, int to_dir) {
  char name[8192];
  const char *what = to_dir ? "folder" : "file";
  if (!to_dir && !known_ext(out)) {
    fprintf(stderr, "loom record: -o %s: unknown extension (a trace is .json, .json.gz, "
            ".pftrace or .pftrace.gz; a folder ends with '/'); nothing was run\n", out);
    return 2;
  }
  if (to_dir) snprintf(name, sizeof name, "%s/program-1.json", out);
  else sample_name(name, sizeof name, out);
  int e = try_create(name);
  if (!e) return 0;
  const char *slash = strrchr(name, '/');
  char dir[8192];
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - name) : 1, slash ? name : ".");
  if (!dir[0]) snprintf(dir, sizeof dir, "/");
  if (e == ENAMETOOLONG)
    fprintf(stderr, "loom record: -o %.200s%s: the %s's name is too long (%zu bytes); nothing "
            "was run\n", out, strlen(out) > 200 ? "..." : "", what, strlen(out));
  else if (e == ENOENT || e == ENOTDIR)
    fprintf(stderr, "loom record: -o %s: folder %s does not exist; nothing was run\n", out, dir);
  else
    fprintf(stderr, "loom record: -o %s: cannot create files in folder %s: %s; nothing was run\n",
            out, dir, strerror(e));
  return 2;
}
