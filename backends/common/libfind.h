/*
 * libfind.h - whether the dynamic loader would find a library, without
 * loading it: for a backend's default check (loom record asks every
 * plug-in whether its runtime is installed before it starts the program).
 * dlopen answers that by loading the library and everything it needs,
 * which loom record then pays on every command: libmpi.so.40 and its five
 * dependencies, a CUDA driver's tens of megabytes.
 *
 * Searched as the loader searches a name without a slash: LD_LIBRARY_PATH,
 * then /etc/ld.so.cache (glibc's format since 2.32, "glibc-ld.so.cache1.1":
 * an entry of this machine's ABI whose name matches and whose file is
 * there), then the default folders.  A cache in a format it does not know
 * (or none) leaves the answer to dlopen, as before.
 */
#ifndef LOOM_BACKEND_LIBFIND_H
#define LOOM_BACKEND_LIBFIND_H

#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int loom_lib_in_dir(const char *dir, size_t len, const char *name) {
  char path[4096];
  int n = snprintf(path, sizeof path, "%.*s/%s", (int)len, dir, name);
  return n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0;
}

/* The flags of a cache entry for this process's ABI (glibc's
 * FLAG_ELF_LIBC6 with its FLAG_*_LIB64), 0 where not known here. */
static uint32_t loom_lib_cache_abi(void) {
#if defined(__x86_64__) && defined(__LP64__)
  return 0x0303;
#elif defined(__aarch64__)
  return 0x0a03;
#else
  return 0;
#endif
}

/* 1 found, 0 not in the cache, -1 no cache this code can read. */
static int loom_lib_in_cache(const char *name) {
  static const char magic[] = "glibc-ld.so.cache1.1";
  uint32_t abi = loom_lib_cache_abi();
  int fd = abi ? open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC) : -1;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 48) {
    if (fd >= 0) close(fd);
    return -1;
  }
  size_t size = (size_t)st.st_size;
  const unsigned char *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return -1;
  int found = -1;
  if (!memcmp(m, magic, sizeof magic - 1)) {
    uint32_t n;
    memcpy(&n, m + 20, 4);
    found = 0;
    /* entries of 24 bytes after the 48-byte header: flags, key, value
     * (string offsets from the file's start), os version, hwcap */
    for (uint32_t i = 0; i < n && 48 + (size_t)(i + 1) * 24 <= size && found != 1; i++) {
      const unsigned char *e = m + 48 + (size_t)i * 24;
      int32_t flags;
      uint32_t key, value;
      memcpy(&flags, e, 4), memcpy(&key, e + 4, 4), memcpy(&value, e + 8, 4);
      if ((uint32_t)flags != abi || key >= size || value >= size) continue;
      const char *k = (const char *)m + key, *v = (const char *)m + value;
      if (memchr(k, 0, size - key) && memchr(v, 0, size - value) && !strcmp(k, name) &&
          access(v, R_OK) == 0)
        found = 1;
    }
  }
  munmap((void *)m, size);
  return found;
}

/* 1 when the loader would find the library name (a file name, "libmpi.so.40"), 0 not. */
static int loom_lib_installed(const char *name) {
  if (strchr(name, '/')) return access(name, R_OK) == 0;
  const char *lp = getenv("LD_LIBRARY_PATH");
  for (const char *p = lp; p && *p;) {
    size_t len = strcspn(p, ":;");
    if (len && loom_lib_in_dir(p, len, name)) return 1;
    p += len;
    if (*p) p++;
  }
  int c = loom_lib_in_cache(name);
  if (c < 0) { /* no cache read: the loader itself, loading it */
    void *h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != NULL;
  }
  if (c) return 1;
  static const char *const dirs[] = {
#if defined(__x86_64__)
      "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
#elif defined(__aarch64__)
      "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
#endif
      "/lib64", "/usr/lib64", "/lib", "/usr/lib"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if (loom_lib_in_dir(dirs[i], strlen(dirs[i]), name)) return 1;
  return 0;
}

#endif
