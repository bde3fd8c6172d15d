/* check.c - `loom check-backend PLUGIN` (placeholder, filled in next). */
#include <stdio.h>
int cmd_check_backend(int argc, char **argv) {
  (void)argc, (void)argv;
  fprintf(stderr, "loom check-backend: not yet\n");
  return 2;
}
