/*
 * roles.c - the marks of each MPI record (plugin.h LOOM_RECORD_F_*): what
 * the call does for `loom report`'s wait states, from the backend's role
 * description (report-names.def, which the report also uses for traces
 * written before the records were marked).  Looked up once per distinct
 * name at flush, never in a wrapper.
 */
#include <string.h>

#include "mpil.h"

#define LOOM_REPORT_NAME(kind, str)
#define LOOM_REPORT_ROLES(str, marks) {str, marks},
static const struct {
  const char *name;
  uint16_t marks;
} table[] = {
#include "report-names.def"
};
#undef LOOM_REPORT_ROLES
#undef LOOM_REPORT_NAME

uint16_t mpil_roles(const char *name) {
  for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
    const char *t = table[i].name;
    size_t n = strlen(t);
    if (n && t[n - 1] == '*' ? !strncmp(name, t, n - 1) : !strcmp(name, t)) return table[i].marks;
  }
  return LOOM_RECORD_F_COMM;
}
