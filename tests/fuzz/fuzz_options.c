/*
 * fuzz_options.c - the session options string: loom__opts_parse, then
 * loom_session_create with it (sizes, windows, ring mode).  Parsed keys are
 * non-empty and free of separators and outer blanks, the last value of a
 * key wins, a failure names what was wrong, and a session that is created
 * can be destroyed.  LOOM_* variables are cleared so only the input counts.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "base/base.h"
#include "fuzz.h"

extern char **environ;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  for (char **e = environ; *e;)
    if (!strncmp(*e, "LOOM_", 5)) {
      char k[256];
      size_t n = strcspn(*e, "=");
      snprintf(k, sizeof k, "%.*s", (int)n, *e);
      unsetenv(k);
    } else e++;
  return 0;
}

static void check_parsed(const loom__opts *o) {
  for (size_t i = 0; i < o->n; i++) {
    const char *k = o->keys[i], *v = o->vals[i];
    size_t kl = strlen(k), vl = strlen(v);
    FUZZ_CHECK(kl > 0, "option %zu has an empty key", i);
    FUZZ_CHECK(!strpbrk(k, ",;=") && !strpbrk(v, ",;"), "option %zu '%s'='%s' kept a separator",
               i, k, v);
    FUZZ_CHECK(!isspace((unsigned char)k[0]) && !isspace((unsigned char)k[kl - 1]) &&
                   (!vl || (!isspace((unsigned char)v[0]) && !isspace((unsigned char)v[vl - 1]))),
               "option '%s'='%s' kept blanks", k, v);
    size_t last = i;
    for (size_t j = i + 1; j < o->n; j++)
      if (!strcmp(o->keys[j], k)) last = j;
    FUZZ_CHECK(loom__opts_get(o, k) == o->vals[last], "key '%s': not the last value", k);
    uint64_t sz;
    if (!loom__parse_size(v, &sz)) FUZZ_CHECK(isdigit((unsigned char)v[0]), "size '%s'", v);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = loom_fuzz_str(data, size);
  loom__opts o;
  if (loom__opts_parse(&o, s) == LOOM_OK) {
    check_parsed(&o);
    loom__opts_free(&o);
  } else {
    FUZZ_CHECK(*loom_last_error(), "a bad option string without a message");
  }
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu", .options = s};
  loom_session *ses = NULL;
  loom_status st = loom_session_create(&cfg, &ses);
  if (st == LOOM_OK) loom_session_destroy(ses);
  else FUZZ_CHECK(!ses && *loom_last_error(), "failed session (%d) without a message", (int)st);
  free(s);
  return 0;
}
