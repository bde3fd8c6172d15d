/*
 * backends.c - `loom backends [--no-probe] [--plugin PATH]...`: the backends
 * of every plug-in `loom record` would load, probed, with their state, the
 * kinds of records they make, what `loom record` sets up for them
 * (enable.c) and the options they declare.
 */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "enable.h"
#include "loom/loom.h"
#include "loom/plugin.h"
#include "spec.h"

static const char *state_name(loom_backend_state s) {
  switch (s) {
  case LOOM_BACKEND_AVAILABLE: return "available";
  case LOOM_BACKEND_UNAVAILABLE: return "unavailable";
  default: return "registered (not probed yet)";
  }
}

static void print_backend(const loom_backend_info *b, void *user) {
  (void)user;
  printf("%-12s device=%-8s %s%s%s\n    from %s\n    kinds:", b->name, b->device_type,
         state_name(b->state), b->reason[0] ? ": " : "", b->reason, b->origin);
  for (int k = 0; k < LOOM_KIND_COUNT_; k++)
    if (b->kinds & LOOM_KIND_BIT(k)) printf(" %s", loom_kind_name((loom_kind)k));
  printf("\n");
  enable_describe(stdout, b);
  /* ABI 1.3: the options it declares (--option NAME.KEY=V) */
  if (b->struct_size > offsetof(loom_backend_info, options) && b->options && b->options[0].key) {
    printf("    options:\n");
    for (const loom_option_desc *o = b->options; o->key; o++)
      printf("      %-26s %s\n", o->key, o->help ? o->help : "");
  }
}

/* Lists backends of every plug-in `loom record` would load (the installed
 * plug-in folder, LOOM_PLUGIN_PATH, LOOM_PLUGINS, --plugin); unless
 * --no-probe, probes them first by preparing (and discarding) a session over
 * every device type. */
int cmd_backends(int argc, char **argv) {
  int probe = 1;
  char *extra[64];
  size_t nextra = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--no-probe")) probe = 0;
    else if (!strcmp(argv[i], "--plugin") && i + 1 < argc && nextra < 64)
      extra[nextra++] = argv[++i];
    else {
      cli_usage(stderr, cli_command("backends"));
      return 2;
    }
  }
  setenv("LOOM_LOG", "error", 0); /* states are listed below, not as warnings */
  char libdir[PATH_MAX];
  plugin_set found = {0};
  int bad = plugins_discover(&found, tool_libdir(libdir, sizeof libdir) == 0 ? libdir : NULL,
                             extra, nextra, "loom backends");
  plugins_free(&found);
  if (probe) {
    loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "all"};
    loom_session *s = NULL;
    if (loom_session_create(&cfg, &s) == LOOM_OK) loom_session_destroy(s);
    else fprintf(stderr, "loom: cannot probe backends: %s\n", loom_last_error());
  }
  size_t n = loom_backends_list(print_backend, NULL);
  if (!n)
    printf("no backends registered (plug-ins load from the installed plug-in folder, "
           "LOOM_PLUGINS=file.so:..., LOOM_PLUGIN_PATH=folder:... or --plugin PATH)\n");
  return bad ? 1 : 0;
}
