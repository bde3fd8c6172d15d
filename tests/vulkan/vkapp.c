/*
 * vkapp.c - an ordinary Vulkan compute program (it knows nothing of loom),
 * recorded by tests/test_vulkan.c.  Three shaders (scale, offset, mix,
 * compiled from GLSL by glslangValidator at build time, SHADER_DIR), one
 * queue per queue the compute family offers (up to two), debug-utils labels
 * when VK_EXT_debug_utils is there.
 *
 *   vkapp [ROUNDS [images]]
 *
 * Submission 1 (cb1): label "upload" { copy staging -> A, fill B }, barrier,
 *   label "scale" { dispatch scale }.
 * Submissions 2..ROUNDS+1: cb2 submitted again each round (fence wait):
 *   label "round" { dispatch offset, barrier, dispatch mix }, barrier,
 *   copy B -> staging.  With two queues, odd rounds go to the second (its
 *   own copy of cb2, from its own pool when the family differs: not here).
 * Last submission (cb3, vkQueueSubmit2 on Vulkan 1.3, vkQueueWaitIdle): a secondary command buffer with a
 *   dispatch of scale, barrier, copy B -> staging.
 * With "images", one more submission before the last: two 64x64 RGBA8
 * images, a barrier moving both to GENERAL, clear of image 1, staging ->
 * image 1, image 1 -> image 2 (vkCmdCopyImage2 on Vulkan 1.3, else
 * vkCmdCopyImage), a blit of image 2 into the top-left 32x32 of image 1,
 * image 1 -> staging.
 * Per round it prints a checksum of the staging buffer, and at the end what
 * it allocated (and freed) per memory heap; the output depends only on the
 * arguments.  Built with WITH_OPENCL (vkapp_cl) it also runs an OpenCL
 * write, kernel and read (clstep.c) before and after the Vulkan part.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#define N 4096u
#define CHECK(x)                                                          \
  do {                                                                    \
    VkResult r_ = (x);                                                    \
    if (r_ != VK_SUCCESS) {                                               \
      fprintf(stderr, "vkapp: %s failed: %d\n", #x, (int)r_);             \
      exit(2);                                                            \
    }                                                                     \
  } while (0)

static VkDevice dev;
static PFN_vkCmdBeginDebugUtilsLabelEXT begin_label;
static PFN_vkCmdEndDebugUtilsLabelEXT end_label;

static void label(VkCommandBuffer cb, const char *name) {
  if (!begin_label) return;
  VkDebugUtilsLabelEXT l = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, .pLabelName = name};
  begin_label(cb, &l);
}
static void unlabel(VkCommandBuffer cb) {
  if (end_label) end_label(cb);
}

static VkShaderModule shader(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.spv", SHADER_DIR, name);
  FILE *f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "vkapp: cannot open %s\n", path); exit(2); }
  static uint32_t code[16384];
  size_t n = fread(code, 1, sizeof code, f);
  fclose(f);
  VkShaderModuleCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = n, .pCode = code};
  VkShaderModule m;
  CHECK(vkCreateShaderModule(dev, &ci, NULL, &m));
  return m;
}

static void barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                         VK_ACCESS_TRANSFER_READ_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                       NULL, 0, NULL);
}

static VkPipelineLayout layout;
static VkDescriptorSet set;

static void dispatch(VkCommandBuffer cb, VkPipeline p) {
  uint32_t n = N;
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, NULL);
  vkCmdPushConstants(cb, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof n, &n);
  vkCmdDispatch(cb, N / 64, 1, 1);
}

static uint32_t memtype(VkPhysicalDevice pd, uint32_t bits, VkMemoryPropertyFlags want) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
  fprintf(stderr, "vkapp: no memory type\n");
  exit(2);
}

/* What the program allocated, per heap and memory kind as loom names them
 * (device-local and host-visible: shared; host-visible only: host_pinned;
 * else device), printed at the end: test_vulkan checks the trace's memory
 * records against it. */
static const char *const kinds[3] = {"device", "host_pinned", "shared"};
static unsigned long long heap_allocs[VK_MAX_MEMORY_HEAPS][3], heap_bytes[VK_MAX_MEMORY_HEAPS][3];

static void allocate(VkPhysicalDevice pd, const VkMemoryAllocateInfo *ai, VkDeviceMemory *mem) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  CHECK(vkAllocateMemory(dev, ai, NULL, mem));
  uint32_t heap = mp.memoryTypes[ai->memoryTypeIndex].heapIndex;
  VkMemoryPropertyFlags f = mp.memoryTypes[ai->memoryTypeIndex].propertyFlags;
  int visible = (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) != 0;
  int k = visible ? 1 + ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) != 0) : 0;
  heap_allocs[heap][k]++;
  heap_bytes[heap][k] += ai->allocationSize;
}

static VkBuffer buffer(VkPhysicalDevice pd, VkMemoryPropertyFlags want, VkDeviceMemory *mem) {
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = N * 4,
                           .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT};
  VkBuffer b;
  CHECK(vkCreateBuffer(dev, &bi, NULL, &b));
  VkMemoryRequirements mr;
  vkGetBufferMemoryRequirements(dev, b, &mr);
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = mr.size,
                             .memoryTypeIndex = memtype(pd, mr.memoryTypeBits, want)};
  allocate(pd, &ai, mem);
  CHECK(vkBindBufferMemory(dev, b, *mem, 0));
  return b;
}

static uint64_t checksum(const uint32_t *v) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t i = 0; i < N; i++) h = (h ^ v[i]) * 1099511628211ull;
  return h;
}

/* The "images" submission (see the top). */
static void images(VkPhysicalDevice pd, VkQueue q, VkCommandPool pool, VkBuffer s, int v13) {
  VkImageCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, .imageType = VK_IMAGE_TYPE_2D,
                          .format = VK_FORMAT_R8G8B8A8_UNORM, .extent = {64, 64, 1}, .mipLevels = 1,
                          .arrayLayers = 1, .samples = VK_SAMPLE_COUNT_1_BIT, .tiling = VK_IMAGE_TILING_OPTIMAL,
                          .usage = VK_IMAGE_USAGE_TRANSFER_SRC_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT};
  VkImage img[2];
  VkDeviceMemory mem[2];
  for (int i = 0; i < 2; i++) {
    CHECK(vkCreateImage(dev, &ii, NULL, &img[i]));
    VkMemoryRequirements mr;
    vkGetImageMemoryRequirements(dev, img[i], &mr);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = mr.size,
                               .memoryTypeIndex = memtype(pd, mr.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)};
    allocate(pd, &ai, &mem[i]);
    CHECK(vkBindImageMemory(dev, img[i], mem[i], 0));
  }
  VkCommandBuffer cb;
  VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
  CHECK(vkAllocateCommandBuffers(dev, &cai, &cb));
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  CHECK(vkBeginCommandBuffer(cb, &bi));
  VkImageSubresourceRange all = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
  VkImageMemoryBarrier ib[2];
  for (int i = 0; i < 2; i++)
    ib[i] = (VkImageMemoryBarrier){.sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
                                   .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT,
                                   .oldLayout = VK_IMAGE_LAYOUT_UNDEFINED, .newLayout = VK_IMAGE_LAYOUT_GENERAL,
                                   .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                                   .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED, .image = img[i],
                                   .subresourceRange = all};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, NULL, 0, NULL,
                       2, ib);
  VkClearColorValue zero = {{0, 0, 0, 0}};
  vkCmdClearColorImage(cb, img[0], VK_IMAGE_LAYOUT_GENERAL, &zero, 1, &all);
  VkImageSubresourceLayers layer = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
  VkBufferImageCopy bic = {.imageSubresource = layer, .imageExtent = {64, 64, 1}};
  vkCmdCopyBufferToImage(cb, s, img[0], VK_IMAGE_LAYOUT_GENERAL, 1, &bic);
  barrier(cb);
  if (v13) {
    VkImageCopy2 r = {.sType = VK_STRUCTURE_TYPE_IMAGE_COPY_2, .srcSubresource = layer, .dstSubresource = layer,
                      .extent = {64, 64, 1}};
    VkCopyImageInfo2 ci = {.sType = VK_STRUCTURE_TYPE_COPY_IMAGE_INFO_2, .srcImage = img[0],
                           .srcImageLayout = VK_IMAGE_LAYOUT_GENERAL, .dstImage = img[1],
                           .dstImageLayout = VK_IMAGE_LAYOUT_GENERAL, .regionCount = 1, .pRegions = &r};
    vkCmdCopyImage2(cb, &ci);
  } else {
    VkImageCopy r = {.srcSubresource = layer, .dstSubresource = layer, .extent = {64, 64, 1}};
    vkCmdCopyImage(cb, img[0], VK_IMAGE_LAYOUT_GENERAL, img[1], VK_IMAGE_LAYOUT_GENERAL, 1, &r);
  }
  barrier(cb);
  VkImageBlit blit = {.srcSubresource = layer, .srcOffsets = {{0, 0, 0}, {64, 64, 1}},
                      .dstSubresource = layer, .dstOffsets = {{0, 0, 0}, {32, 32, 1}}};
  vkCmdBlitImage(cb, img[1], VK_IMAGE_LAYOUT_GENERAL, img[0], VK_IMAGE_LAYOUT_GENERAL, 1, &blit, VK_FILTER_NEAREST);
  barrier(cb);
  vkCmdCopyImageToBuffer(cb, img[0], VK_IMAGE_LAYOUT_GENERAL, s, 1, &bic);
  CHECK(vkEndCommandBuffer(cb));
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
  CHECK(vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE));
  CHECK(vkQueueWaitIdle(q));
  for (int i = 0; i < 2; i++) vkDestroyImage(dev, img[i], NULL), vkFreeMemory(dev, mem[i], NULL);
}

#ifdef WITH_OPENCL
void cl_step(const char *tag); /* clstep.c */
#else
static void cl_step(const char *tag) { (void)tag; }
#endif

/* "churn": more instances and devices than a small table holds, all alive
 * at once and each used, before the real work (a layer that lost track of
 * one would leave the program without its functions). */
enum { CHURN = 70 };
static void churn(const VkInstanceCreateInfo *ici, VkPhysicalDevice pd, const VkDeviceCreateInfo *dci,
                  uint32_t fam) {
  VkInstance in[CHURN];
  for (int i = 0; i < CHURN; i++) {
    CHECK(vkCreateInstance(ici, NULL, &in[i]));
    uint32_t n = 0;
    CHECK(vkEnumeratePhysicalDevices(in[i], &n, NULL));
  }
  for (int i = 0; i < CHURN; i++) vkDestroyInstance(in[i], NULL);
  VkDevice d[CHURN];
  for (int i = 0; i < CHURN; i++) {
    CHECK(vkCreateDevice(pd, dci, NULL, &d[i]));
    VkQueue q;
    vkGetDeviceQueue(d[i], fam, 0, &q);
    CHECK(vkQueueWaitIdle(q));
  }
  for (int i = 0; i < CHURN; i++) vkDestroyDevice(d[i], NULL);
  printf("churned %d instances and %d devices\n", CHURN, CHURN);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  cl_step("before");
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "vkapp",
                           .apiVersion = VK_API_VERSION_1_3};
  const char *ext[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  uint32_t next = 0;
  vkEnumerateInstanceExtensionProperties(NULL, &next, NULL);
  VkExtensionProperties *ep = calloc(next + 1, sizeof *ep);
  vkEnumerateInstanceExtensionProperties(NULL, &next, ep);
  int debug = 0;
  for (uint32_t i = 0; i < next; i++) debug |= !strcmp(ep[i].extensionName, ext[0]);
  free(ep);
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app,
                              .enabledExtensionCount = debug ? 1 : 0, .ppEnabledExtensionNames = ext};
  VkInstance inst;
  VkResult rc = vkCreateInstance(&ici, NULL, &inst);
  if (rc != VK_SUCCESS) {
    printf("no Vulkan (vkCreateInstance: %d)\n", (int)rc);
    return 0;
  }
  uint32_t npd = 1;
  VkPhysicalDevice pd = VK_NULL_HANDLE;
  rc = vkEnumeratePhysicalDevices(inst, &npd, &pd);
  if ((rc != VK_SUCCESS && rc != VK_INCOMPLETE) || !npd) {
    printf("no Vulkan device\n");
    vkDestroyInstance(inst, NULL);
    return 0;
  }
  if (debug) {
    begin_label = (PFN_vkCmdBeginDebugUtilsLabelEXT)vkGetInstanceProcAddr(inst, "vkCmdBeginDebugUtilsLabelEXT");
    end_label = (PFN_vkCmdEndDebugUtilsLabelEXT)vkGetInstanceProcAddr(inst, "vkCmdEndDebugUtilsLabelEXT");
  }
  uint32_t nf = 8, fam = UINT32_MAX;
  VkQueueFamilyProperties qf[8];
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, qf);
  for (uint32_t i = 0; i < nf && fam == UINT32_MAX; i++)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) fam = i;
  uint32_t nq = qf[fam].queueCount >= 2 ? 2 : 1;
  float prio[2] = {1, 1};
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = fam,
                                 .queueCount = nq, .pQueuePriorities = prio};
  /* Vulkan 1.3: the last submission goes through vkQueueSubmit2 */
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(pd, &props);
  int submit2 = props.apiVersion >= VK_API_VERSION_1_3;
  VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                          .synchronization2 = VK_TRUE};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci, .pNext = submit2 ? &f13 : NULL};
  if (argc > 2 && !strcmp(argv[2], "churn")) churn(&ici, pd, &dci, fam);
  CHECK(vkCreateDevice(pd, &dci, NULL, &dev));
  VkQueue q[2];
  for (uint32_t i = 0; i < nq; i++) vkGetDeviceQueue(dev, fam, i, &q[i]);

  VkDeviceMemory ms, ma, mb;
  VkBuffer s = buffer(pd, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, &ms);
  VkBuffer a = buffer(pd, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &ma);
  VkBuffer b = buffer(pd, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &mb);
  uint32_t *host;
  CHECK(vkMapMemory(dev, ms, 0, N * 4, 0, (void **)&host));
  for (uint32_t i = 0; i < N; i++) host[i] = i * 7u + 1u;

  VkDescriptorSetLayoutBinding bind[2] = {
      {.binding = 0, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1,
       .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT},
      {.binding = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1,
       .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT}};
  VkDescriptorSetLayoutCreateInfo dl = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                        .bindingCount = 2, .pBindings = bind};
  VkDescriptorSetLayout dsl;
  CHECK(vkCreateDescriptorSetLayout(dev, &dl, NULL, &dsl));
  VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = 4};
  VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                   .pSetLayouts = &dsl, .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr};
  CHECK(vkCreatePipelineLayout(dev, &pl, NULL, &layout));
  VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 2};
  VkDescriptorPoolCreateInfo dp = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1,
                                   .poolSizeCount = 1, .pPoolSizes = &ps};
  VkDescriptorPool dpool;
  CHECK(vkCreateDescriptorPool(dev, &dp, NULL, &dpool));
  VkDescriptorSetAllocateInfo dsa = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                     .descriptorPool = dpool, .descriptorSetCount = 1, .pSetLayouts = &dsl};
  CHECK(vkAllocateDescriptorSets(dev, &dsa, &set));
  VkDescriptorBufferInfo dbi[2] = {{a, 0, VK_WHOLE_SIZE}, {b, 0, VK_WHOLE_SIZE}};
  VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set, .descriptorCount = 2,
                            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = dbi};
  vkUpdateDescriptorSets(dev, 1, &w, 0, NULL);

  const char *names[3] = {"scale", "offset", "mix"};
  VkComputePipelineCreateInfo pci[3];
  VkShaderModule mods[3];
  for (int i = 0; i < 3; i++) {
    mods[i] = shader(names[i]);
    pci[i] = (VkComputePipelineCreateInfo){
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, .layout = layout,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = mods[i], .pName = names[i]}};
  }
  VkPipeline pipe[3];
  CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 3, pci, NULL, pipe));

  VkCommandPoolCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = fam,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT};
  VkCommandPool pool;
  CHECK(vkCreateCommandPool(dev, &cpi, NULL, &pool));
  VkCommandBuffer cb[4], sec;
  VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 4};
  CHECK(vkAllocateCommandBuffers(dev, &cai, cb));
  cai.level = VK_COMMAND_BUFFER_LEVEL_SECONDARY;
  cai.commandBufferCount = 1;
  CHECK(vkAllocateCommandBuffers(dev, &cai, &sec));
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  VkBufferCopy all = {0, 0, N * 4};

  /* cb1: upload, fill, scale */
  CHECK(vkBeginCommandBuffer(cb[0], &bi));
  label(cb[0], "upload");
  vkCmdCopyBuffer(cb[0], s, a, 1, &all);
  vkCmdFillBuffer(cb[0], b, 0, VK_WHOLE_SIZE, 0);
  unlabel(cb[0]);
  barrier(cb[0]);
  label(cb[0], "scale");
  dispatch(cb[0], pipe[0]);
  unlabel(cb[0]);
  CHECK(vkEndCommandBuffer(cb[0]));
  /* cb2 (and cb[2], its twin for the second queue): a round */
  for (uint32_t k = 1; k <= nq; k++) {
    CHECK(vkBeginCommandBuffer(cb[k], &bi));
    label(cb[k], "round");
    dispatch(cb[k], pipe[1]);
    barrier(cb[k]);
    dispatch(cb[k], pipe[2]);
    unlabel(cb[k]);
    barrier(cb[k]);
    vkCmdCopyBuffer(cb[k], b, s, 1, &all);
    CHECK(vkEndCommandBuffer(cb[k]));
  }
  /* sec, run from cb3 */
  VkCommandBufferInheritanceInfo inh = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO};
  VkCommandBufferBeginInfo sbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .pInheritanceInfo = &inh};
  CHECK(vkBeginCommandBuffer(sec, &sbi));
  dispatch(sec, pipe[0]);
  CHECK(vkEndCommandBuffer(sec));
  CHECK(vkBeginCommandBuffer(cb[3], &bi));
  vkCmdExecuteCommands(cb[3], 1, &sec);
  barrier(cb[3]);
  vkCmdCopyBuffer(cb[3], b, s, 1, &all);
  CHECK(vkEndCommandBuffer(cb[3]));

  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence;
  CHECK(vkCreateFence(dev, &fi, NULL, &fence));
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb[0]};
  CHECK(vkQueueSubmit(q[0], 1, &si, fence));
  CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
  for (int r = 0; r < rounds; r++) {
    uint32_t k = nq == 2 ? (uint32_t)(r % 2) : 0;
    CHECK(vkResetFences(dev, 1, &fence));
    si.pCommandBuffers = &cb[1 + k];
    CHECK(vkQueueSubmit(q[k], 1, &si, fence));
    CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
    printf("round %d: %016llx\n", r, (unsigned long long)checksum(host));
  }
  if (argc > 2 && !strcmp(argv[2], "images")) {
    images(pd, q[0], pool, s, submit2);
    printf("images: %016llx\n", (unsigned long long)checksum(host));
  }
  si.pCommandBuffers = &cb[3];
  if (submit2) {
    VkCommandBufferSubmitInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO, .commandBuffer = cb[3]};
    VkSubmitInfo2 s2 = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO_2, .commandBufferInfoCount = 1,
                        .pCommandBufferInfos = &ci};
    CHECK(vkQueueSubmit2(q[0], 1, &s2, VK_NULL_HANDLE));
  } else {
    CHECK(vkQueueSubmit(q[0], 1, &si, VK_NULL_HANDLE));
  }
  CHECK(vkQueueWaitIdle(q[0]));
  printf("final: %016llx (queues %u)\n", (unsigned long long)checksum(host), nq);

  vkDestroyFence(dev, fence, NULL);
  vkDestroyCommandPool(dev, pool, NULL);
  for (int i = 0; i < 3; i++) vkDestroyPipeline(dev, pipe[i], NULL), vkDestroyShaderModule(dev, mods[i], NULL);
  vkDestroyDescriptorPool(dev, dpool, NULL);
  vkDestroyPipelineLayout(dev, layout, NULL);
  vkDestroyDescriptorSetLayout(dev, dsl, NULL);
  vkUnmapMemory(dev, ms);
  VkBuffer bufs[3] = {s, a, b};
  VkDeviceMemory mems[3] = {ms, ma, mb};
  for (int i = 0; i < 3; i++) vkDestroyBuffer(dev, bufs[i], NULL), vkFreeMemory(dev, mems[i], NULL);
  vkDestroyDevice(dev, NULL);
  vkDestroyInstance(inst, NULL);
  for (uint32_t h = 0; h < VK_MAX_MEMORY_HEAPS; h++)
    for (int k = 0; k < 3; k++)
      if (heap_allocs[h][k])
        printf("memory heap %u %s: %llu allocations, %llu bytes, all freed\n", h, kinds[k],
               heap_allocs[h][k], heap_bytes[h][k]);
  cl_step("after");
  return 0;
}
