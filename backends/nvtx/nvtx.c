/*
 * nvtx.c - libloom-nvtx.so: an NVTX injection library (NVTX_INJECTION64_PATH,
 * set by `loom record`) and a loom plug-in in one.
 *
 * On the program's first NVTX call, NVTX's header-only app side dlopen()s
 * this library and calls InitializeInjectionNvtx2 with its
 * nvtxGetExportTable; we fill the CORE and CORE2 callback slots (see
 * nvtxDetail/nvtxInit.h).  Push/pop ranges become nested user ranges on the
 * calling thread, start/end ranges become loom ranges with an id (any thread),
 * marks become instants.  The domain's name is the category (the default
 * domain keeps loom's user_annotation); an event's NVTX category, named with
 * nvtx[Domain]NameCategory*, is its "NVTX category" argument (the number
 * when unnamed).  nvtxNameOsThread* names the thread's track
 * (loom_thread_name).  Registered strings, domains and category names are
 * kept for the life of the process.
 */
#define _GNU_SOURCE
#define ANNOT_NAME "nvtx"
#define ANNOT_ENV "NVTX_INJECTION64_PATH"
#include "annot.h"

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <wchar.h>

#define EXPORT __attribute__((visibility("default")))

/* Category names of a domain: a small table, appended under cat_mu and
 * read without it (n is published after the entry; names are permanent). */
#define MAX_CATS 128
typedef struct cat_tab {
  struct { uint32_t id; const char *name; } e[MAX_CATS];
  atomic_uint n;
} cat_tab;
static pthread_mutex_t cat_mu = PTHREAD_MUTEX_INITIALIZER;

/* nvtxDomainHandle_t points at these. */
typedef struct domain_rec {
  const char *name; /* permanent; NULL = default domain */
  cat_tab cats;
} domain_rec;
static domain_rec default_domain;

static void name_category(domain_rec *d, uint32_t id, const char *name) {
  if (!d) d = &default_domain;
  if (!name) return;
  pthread_mutex_lock(&cat_mu);
  unsigned n = atomic_load_explicit(&d->cats.n, memory_order_relaxed), i;
  for (i = 0; i < n && d->cats.e[i].id != id; i++) {
  }
  if (i < n) { /* renamed: the newest name counts (a pointer store) */
    __atomic_store_n(&d->cats.e[i].name, name, __ATOMIC_RELEASE);
  } else if (n < MAX_CATS) {
    d->cats.e[n].id = id;
    d->cats.e[n].name = name;
    atomic_store_explicit(&d->cats.n, n + 1, memory_order_release);
  }
  pthread_mutex_unlock(&cat_mu);
}

/* The event's category as a permanent string: its name, else its number;
 * NULL for category 0 (none). */
static const char *category_of(domain_rec *d, const nvtxEventAttributes_t *a) {
  if (!a || !a->category || a->size < NVTX_EVENT_ATTRIB_STRUCT_SIZE) return NULL;
  if (!d) d = &default_domain;
  unsigned n = atomic_load_explicit(&d->cats.n, memory_order_acquire);
  for (unsigned i = 0; i < n; i++)
    if (d->cats.e[i].id == a->category)
      return __atomic_load_n(&d->cats.e[i].name, __ATOMIC_ACQUIRE);
  char num[16];
  snprintf(num, sizeof num, "%u", a->category);
  return annot_perm(num, SIZE_MAX);
}
#define CAT_KEY "NVTX category"

/* nvtxNameOsThread: 0 and the calling thread's own ids name the caller. */
static void name_thread(uint32_t tid, const char *name) {
  if (tid == (uint32_t)syscall(SYS_gettid) || tid == (uint32_t)(uintptr_t)pthread_self()) tid = 0;
  annot_thread_name(tid, name);
}

static atomic_uint_fast64_t next_range_id = 1;

/* UTF-8 copy of a wide string into a permanent string. */
static const char *from_wide(const wchar_t *w) {
  if (!w) return NULL;
  size_t n = wcslen(w), cap = 4 * n + 1, k = 0;
  char stackbuf[512] = "", *b = cap <= sizeof stackbuf ? stackbuf : calloc(cap, 1);
  if (!b) return NULL;
  for (size_t i = 0; i < n; i++) {
    uint32_t c = (uint32_t)w[i];
    if (c < 0x80) b[k++] = (char)c;
    else if (c < 0x800) { b[k++] = (char)(0xC0 | (c >> 6)); b[k++] = (char)(0x80 | (c & 63)); }
    else if (c < 0x10000) {
      b[k++] = (char)(0xE0 | (c >> 12)); b[k++] = (char)(0x80 | ((c >> 6) & 63));
      b[k++] = (char)(0x80 | (c & 63));
    } else {
      b[k++] = (char)(0xF0 | ((c >> 18) & 7)); b[k++] = (char)(0x80 | ((c >> 12) & 63));
      b[k++] = (char)(0x80 | ((c >> 6) & 63)); b[k++] = (char)(0x80 | (c & 63));
    }
  }
  const char *r = annot_perm(b, k);
  if (b != stackbuf) free(b);
  return r;
}

/* The message of an event: ASCII (the caller's, valid during the call),
 * wide (converted) or registered (a permanent string). */
static const char *message(const nvtxEventAttributes_t *a) {
  if (!a) return NULL;
  switch (a->messageType) {
  case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii;
  case NVTX_MESSAGE_TYPE_UNICODE: return from_wide(a->message.unicode);
  case NVTX_MESSAGE_TYPE_REGISTERED: return (const char *)a->message.registered;
  default: return "";
  }
}

static const char *cat_of(nvtxDomainHandle_t d) { return d ? ((domain_rec *)d)->name : NULL; }

/* ---- CORE ---------------------------------------------------------------- */
static void MarkEx(const nvtxEventAttributes_t *a) {
  annot_mark_arg(NULL, CAT_KEY, category_of(NULL, a), message(a), SIZE_MAX);
}
static void MarkA(const char *m) { annot_mark(NULL, m, SIZE_MAX); }
static void MarkW(const wchar_t *m) { annot_mark(NULL, from_wide(m), SIZE_MAX); }
static nvtxRangeId_t start_in(const char *cat, const char *m) {
  nvtxRangeId_t id = atomic_fetch_add(&next_range_id, 1);
  (void)cat; /* loom_range_begin has no category */
  annot_range_begin(id, m ? m : "");
  return id;
}
static nvtxRangeId_t RangeStartEx(const nvtxEventAttributes_t *a) {
  return start_in(NULL, message(a));
}
static nvtxRangeId_t RangeStartA(const char *m) { return start_in(NULL, m); }
static nvtxRangeId_t RangeStartW(const wchar_t *m) { return start_in(NULL, from_wide(m)); }
static void RangeEnd(nvtxRangeId_t id) { annot_range_end(id); }
static int RangePushEx(const nvtxEventAttributes_t *a) {
  return annot_push_arg(NULL, CAT_KEY, category_of(NULL, a), message(a), SIZE_MAX);
}
static int RangePushA(const char *m) { return annot_push(NULL, m, SIZE_MAX); }
static int RangePushW(const wchar_t *m) { return annot_push(NULL, from_wide(m), SIZE_MAX); }
static int RangePop(void) { return annot_pop(); }
static void NameCategoryA(uint32_t c, const char *n) {
  name_category(NULL, c, annot_perm(n, SIZE_MAX));
}
static void NameCategoryW(uint32_t c, const wchar_t *n) { name_category(NULL, c, from_wide(n)); }
static void NameOsThreadA(uint32_t t, const char *n) { name_thread(t, n); }
static void NameOsThreadW(uint32_t t, const wchar_t *n) { name_thread(t, from_wide(n)); }

/* ---- CORE2 (domains) ------------------------------------------------------ */
static void DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  annot_mark_arg(cat_of(d), CAT_KEY, category_of((domain_rec *)d, a), message(a), SIZE_MAX);
}
static nvtxRangeId_t DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  return start_in(cat_of(d), message(a));
}
static void DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) { (void)d, annot_range_end(id); }
static int DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  return annot_push_arg(cat_of(d), CAT_KEY, category_of((domain_rec *)d, a), message(a), SIZE_MAX);
}
static int DomainRangePop(nvtxDomainHandle_t d) { (void)d; return annot_pop(); }
static nvtxResourceHandle_t DomainResourceCreate(nvtxDomainHandle_t d,
                                                 nvtxResourceAttributes_t *a) {
  (void)d, (void)a;
  return NULL;
}
static void DomainResourceDestroy(nvtxResourceHandle_t r) { (void)r; }
static void DomainNameCategoryA(nvtxDomainHandle_t d, uint32_t c, const char *n) {
  name_category((domain_rec *)d, c, annot_perm(n, SIZE_MAX));
}
static void DomainNameCategoryW(nvtxDomainHandle_t d, uint32_t c, const wchar_t *n) {
  name_category((domain_rec *)d, c, from_wide(n));
}
static nvtxStringHandle_t DomainRegisterStringA(nvtxDomainHandle_t d, const char *s) {
  (void)d;
  return (nvtxStringHandle_t)(uintptr_t)annot_perm(s ? s : "", SIZE_MAX);
}
static nvtxStringHandle_t DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t *s) {
  (void)d;
  return (nvtxStringHandle_t)(uintptr_t)(s ? from_wide(s) : annot_perm("", 0));
}
static nvtxDomainHandle_t domain_create(const char *name) {
  /* one record per name, never freed: records may still name it */
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static domain_rec *doms[256];
  static size_t ndoms;
  const char *p = annot_perm(name ? name : "", SIZE_MAX);
  pthread_mutex_lock(&mu);
  domain_rec *r = NULL;
  for (size_t i = 0; i < ndoms; i++)
    if (doms[i]->name == p) r = doms[i];
  if (!r && (r = calloc(1, sizeof *r))) {
    r->name = p;
    if (ndoms < 256) doms[ndoms++] = r;
  }
  pthread_mutex_unlock(&mu);
  return (nvtxDomainHandle_t)r;
}
static nvtxDomainHandle_t DomainCreateA(const char *n) { return domain_create(n); }
static nvtxDomainHandle_t DomainCreateW(const wchar_t *n) { return domain_create(from_wide(n)); }
static void DomainDestroy(nvtxDomainHandle_t d) { (void)d; /* kept: see domain_create */ }
static void Initialize(const void *reserved) { (void)reserved; }

/* ---- injection entry --------------------------------------------------------- */
typedef void (*fp)(void);
static void fill(NvtxGetExportTableFunc_t get, NvtxCallbackModule mod, const fp *fns, unsigned n) {
  const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
  if (!cb || cb->struct_size < sizeof *cb) return;
  NvtxFunctionTable table = NULL;
  unsigned size = 0;
  if (!cb->GetModuleFunctionTable(mod, &table, &size) || !table) return;
  for (unsigned i = 1; i < n && i < size; i++)
    if (fns[i] && table[i]) *table[i] = fns[i];
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  if (!get) return 0;
  static const fp core[NVTX_CBID_CORE_SIZE] = {
      [NVTX_CBID_CORE_MarkEx] = (fp)MarkEx,
      [NVTX_CBID_CORE_MarkA] = (fp)MarkA,
      [NVTX_CBID_CORE_MarkW] = (fp)MarkW,
      [NVTX_CBID_CORE_RangeStartEx] = (fp)RangeStartEx,
      [NVTX_CBID_CORE_RangeStartA] = (fp)RangeStartA,
      [NVTX_CBID_CORE_RangeStartW] = (fp)RangeStartW,
      [NVTX_CBID_CORE_RangeEnd] = (fp)RangeEnd,
      [NVTX_CBID_CORE_RangePushEx] = (fp)RangePushEx,
      [NVTX_CBID_CORE_RangePushA] = (fp)RangePushA,
      [NVTX_CBID_CORE_RangePushW] = (fp)RangePushW,
      [NVTX_CBID_CORE_RangePop] = (fp)RangePop,
      [NVTX_CBID_CORE_NameCategoryA] = (fp)NameCategoryA,
      [NVTX_CBID_CORE_NameCategoryW] = (fp)NameCategoryW,
      [NVTX_CBID_CORE_NameOsThreadA] = (fp)NameOsThreadA,
      [NVTX_CBID_CORE_NameOsThreadW] = (fp)NameOsThreadW,
  };
  static const fp core2[NVTX_CBID_CORE2_SIZE] = {
      [NVTX_CBID_CORE2_DomainMarkEx] = (fp)DomainMarkEx,
      [NVTX_CBID_CORE2_DomainRangeStartEx] = (fp)DomainRangeStartEx,
      [NVTX_CBID_CORE2_DomainRangeEnd] = (fp)DomainRangeEnd,
      [NVTX_CBID_CORE2_DomainRangePushEx] = (fp)DomainRangePushEx,
      [NVTX_CBID_CORE2_DomainRangePop] = (fp)DomainRangePop,
      [NVTX_CBID_CORE2_DomainResourceCreate] = (fp)DomainResourceCreate,
      [NVTX_CBID_CORE2_DomainResourceDestroy] = (fp)DomainResourceDestroy,
      [NVTX_CBID_CORE2_DomainNameCategoryA] = (fp)DomainNameCategoryA,
      [NVTX_CBID_CORE2_DomainNameCategoryW] = (fp)DomainNameCategoryW,
      [NVTX_CBID_CORE2_DomainRegisterStringA] = (fp)DomainRegisterStringA,
      [NVTX_CBID_CORE2_DomainRegisterStringW] = (fp)DomainRegisterStringW,
      [NVTX_CBID_CORE2_DomainCreateA] = (fp)DomainCreateA,
      [NVTX_CBID_CORE2_DomainCreateW] = (fp)DomainCreateW,
      [NVTX_CBID_CORE2_DomainDestroy] = (fp)DomainDestroy,
      [NVTX_CBID_CORE2_Initialize] = (fp)Initialize,
  };
  fill(get, NVTX_CB_MODULE_CORE, core, NVTX_CBID_CORE_SIZE);
  fill(get, NVTX_CB_MODULE_CORE2, core2, NVTX_CBID_CORE2_SIZE);
  return 1;
}
