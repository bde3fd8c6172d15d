/*
 * loom - the command-line tool.  Subcommands so far: version, backends.
 * (record, report, convert and merge come with their issues.)
 */
#include <stdio.h>
#include <string.h>

#include "loom/loom.h"

static const char *state_name(loom_backend_state s) {
  switch (s) {
  case LOOM_BACKEND_AVAILABLE: return "available";
  case LOOM_BACKEND_UNAVAILABLE: return "unavailable";
  default: return "registered (not probed yet)";
  }
}

static void print_backend(const loom_backend_info *b, void *user) {
  (void)user;
  printf("%-12s device=%-8s %s%s%s\n    from %s\n", b->name, b->device_type,
         state_name(b->state), b->reason[0] ? ": " : "", b->reason, b->origin);
}

static int cmd_backends(void) {
  loom_init();
  size_t n = loom_backends_list(print_backend, NULL);
  if (!n)
    printf("no backends registered (plug-ins load from LOOM_PLUGINS=file.so:... "
           "or LOOM_PLUGIN_PATH=folder:...)\n");
  return 0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: loom <command>\n"
             "  version      print loom's version\n"
             "  backends     list registered backends and their state\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
    printf("loom %s\n", loom_version_string());
    return 0;
  }
  if (!strcmp(argv[1], "backends")) return cmd_backends();
  if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "loom: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
