/*
 * hta_names.c - Holistic Trace Analysis's own name lists, for the report's
 * HTA section only.
 *
 * That section promises HTA's figures, so it classifies events the way HTA
 * does, by names and categories, whatever vendors those lists leave out.
 * They are copied from HTA 0.6.1 (facebookresearch/HolisticTraceAnalysis,
 * commit f4d0062c, hta/common/types.py, hta/analyzers/breakdown_analysis.py
 * and hta/analyzers/cuda_kernel_analysis.py); the patterns are Python
 * regular expressions applied with re.match (anchored at the start), here
 * written out as prefix and substring tests.  This is the one place in
 * src/ where runtime names are spelt: loom's own sections go by marks and
 * structure (analyze.c), and runtimes' vocabularies for traces without
 * marks live with their backends (backends/x/report-names.def).
 */
#include <string.h>

#include "analysis.h"

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* CommunicateKernelGroupingPattern: (^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*) */
static int hta_comm(const char *n) {
  return starts(n, "nccl") || starts(n, "hip") || starts(n, "hccl") || strstr(n, "ncclKernel");
}

/* MemoryKernelGroupingPattern: (^(hip)?Memcpy)|(^(hip)?Memset)|(^dma) */
static int hta_memory(const char *n) {
  return starts(n, "Memcpy") || starts(n, "hipMemcpy") || starts(n, "Memset") ||
         starts(n, "hipMemset") || starts(n, "dma");
}

/* ComputeKernelGroupingPattern, an inverse match: a name matching any of
 * these is not computation (syncs and waits are OTHER, HTA PR #162). */
static int hta_not_compute(const char *n) {
  static const char *const pre[] = {"nccl", "Stream Wait Event", "runFunction", "hip", "job_exe",
                                    "packet", "pe_exe", "cpum_exe_subgraph", "hccl",
                                    "collective_subgraph_execution"};
  static const char *const sub[] = {"Memcpy", "Memset", "dma", "Sync"};
  for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
    if (starts(n, pre[i])) return 1;
  for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++)
    if (strstr(n, sub[i])) return 1;
  const char *l = starts(n, "cuda") ? strstr(n + 4, "LaunchKernel") : NULL; /* cuda.*LaunchKernel */
  return l != NULL;
}

int loom__hta_kernel_type(const char *name) {
  if (hta_comm(name)) return LOOM__HTA_COMM;
  if (hta_memory(name)) return LOOM__HTA_MEMORY;
  if (!hta_not_compute(name)) return LOOM__HTA_COMPUTE;
  return LOOM__HTA_OTHER;
}

/* cuda_kernel_analysis.py, cuda_kernel_launch_stats: the launch calls whose
 * device work the launch statistics cover (memory calls included, HTA's
 * default include_memory_events=True). */
int loom__hta_launch_name(const char *name) {
  static const char *const names[] = {"cudaLaunchKernel", "cudaLaunchKernelExC",
                                      "runFunction - job_prep_and_submit_for_execution",
                                      "cudaMemcpyAsync", "cudaMemsetAsync"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(name, names[i])) return 1;
  return 0;
}

/* breakdown_analysis.py, get_idle_time_breakdown: the categories of the
 * events the idle-time breakdown looks at (HTA PR #149). */
int loom__hta_idle_category(const char *cat) {
  static const char *const cats[] = {"kernel",     "Kernel", "gpu_memset",     "Memset",
                                     "gpu_memcpy", "Memcpy", "mtia_ccp_events"};
  for (size_t i = 0; cat && i < sizeof cats / sizeof cats[0]; i++)
    if (!strcmp(cat, cats[i])) return 1;
  return 0;
}
