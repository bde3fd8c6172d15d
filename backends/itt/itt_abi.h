/*
 * itt_abi.h - the parts of Intel's ittnotify ABI (intel/ittapi:
 * include/ittnotify.h, src/ittnotify/ittnotify_config.h) that a collector
 * sees, declared from that public documentation (no Debian package ships
 * the headers).  Linux, 64-bit.
 */
#ifndef LOOM_ITT_ABI_H
#define LOOM_ITT_ABI_H
#include <pthread.h>

typedef enum { __itt_group_none = 0, __itt_group_all = -1 } __itt_group_id;

typedef struct ___itt_domain {
  volatile int flags; /* zero: disabled; the app-side macros skip it */
  const char *nameA;
  void *nameW;
  int extra1;
  void *extra2;
  struct ___itt_domain *next;
} __itt_domain;

typedef struct ___itt_string_handle {
  const char *strA;
  void *strW;
  int extra1;
  void *extra2;
  struct ___itt_string_handle *next;
} __itt_string_handle;

typedef struct ___itt_id {
  unsigned long long d1, d2, d3;
} __itt_id;

typedef struct ___itt_api_info {
  const char *name;
  void **func_ptr;
  void *init_func;
  void *null_func;
  __itt_group_id group;
} __itt_api_info;

typedef unsigned long long __itt_timestamp;
typedef struct ___itt_counter *__itt_counter;
typedef enum {
  __itt_metadata_unknown = 0, __itt_metadata_u64, __itt_metadata_s64, __itt_metadata_u32,
  __itt_metadata_s32, __itt_metadata_u16, __itt_metadata_s16, __itt_metadata_float,
  __itt_metadata_double
} __itt_metadata_type;
typedef int __itt_scope;

/* Layout as measured in Debian's libdnnl.so.2 (ittnotify 3.x, build
 * 20180723): an 8-byte magic ED AB AB EC 0D EE DA 30, then version 3.0,
 * api_list_ptr at 0x78 and domain_list at 0x90. */
typedef struct ___itt_global {
  unsigned char magic[8];
  unsigned long version_major, version_minor, version_build;
  volatile long api_initialized, mutex_initialized, atomic_counter;
  pthread_mutex_t mutex;
  void *lib;
  void *error_handler;
  const char **dll_path_ptr;
  __itt_api_info *api_list_ptr;
  struct ___itt_global *next;
  /* joinable part */
  void *thread_list;
  __itt_domain *domain_list;
  __itt_string_handle *string_list;
  int state;
  void *counter_list;
  /* (newer versions append more; not read) */
} __itt_global;
_Static_assert(__builtin_offsetof(__itt_global, api_list_ptr) == 0x78, "ittnotify layout");
_Static_assert(__builtin_offsetof(__itt_global, domain_list) == 0x90, "ittnotify layout");

#endif
