/*
 * enable.h - how the loom tool finds plug-ins and enables their backends in
 * a program (enable.c), shared by `loom record`, `loom backends` and
 * `loom check-backend`.  Nothing here names a runtime: each backend says
 * what it needs in its table (loom_backend_enable, plugin.h).
 */
#ifndef LOOM_TOOL_ENABLE_H
#define LOOM_TOOL_ENABLE_H

#include <stddef.h>
#include <stdio.h>

#include "loom/plugin.h"

/* The plug-in files found, in load order (real paths, no duplicates). */
typedef struct plugin_set {
  char **paths;
  size_t n, cap;
  unsigned char *named; /* per path: 1 when the user named it (not only libdir) */
  char *bad_folders; /* LOOM_PLUGIN_PATH folders that cannot be opened, or NULL */
} plugin_set;

/* The folder of loom's injected libraries and installed plug-ins:
 * LOOM_LIBEXEC, else the build tree's plugins/ next to this binary, else
 * <prefix>/lib/loom (or lib64, lib/<arch>).  0 on success. */
int tool_libdir(char *out, size_t n);

/* Finds every plug-in (libdir's libloom-*.so, LOOM_PLUGIN_PATH folders,
 * LOOM_PLUGINS files, then extra[]) and loads them into this process, with
 * loom's own warnings silenced (the program's session reports them).
 * libdir may be NULL.  Returns 0, or -1 when one of extra[] (named by the
 * user) could not be loaded: the reason is printed, prefixed with who. */
int plugins_discover(plugin_set *ps, const char *libdir, char *const *extra,
                     size_t nextra, const char *who);
void plugins_free(plugin_set *ps);

/* Sets this process's environment for the program: LOOM_PLUGINS (those the
 * user named, and of libdir's those with a backend of a device type
 * recorded or with none; not those that ask not to be), each backend's
 * settings, and
 * LD_PRELOAD (the backends' preloads, then preload_first).  Writes the
 * default device list ("cpu" and every LOOM_ENABLE_F_DEFAULT type whose
 * check passes) into devices.  asked: the device list the user named
 * (NULL: the default one); it and `also` (types recorded beside it, "a,b"
 * or NULL) decide the preloads of LOOM_ENABLE_F_PRELOAD_WHEN_ASKED.  Returns
 * 0, or -1 on a message printed. */
int plugins_enable(const plugin_set *ps, const char *preload_first, const char *asked,
                   const char *also, char *devices, size_t n);

/* Prints what a backend's table asks of loom record (for `loom backends`),
 * indented by four spaces. */
void enable_describe(FILE *f, const loom_backend_info *b);

/* value with "$SELF" replaced by self and "$DIR" by its folder (malloc'd). */
char *enable_subst(const char *value, const char *self);

#endif
