/*
 * work_vk.cpp - kineto_drive's Vulkan workload (work.h): one compute queue,
 * one command buffer recorded and submitted by every op: a fill of
 * buffer A, the "scale" shader (tests/vulkan/scale.comp, b = a * 3) and a
 * copy of B into a host-visible buffer, then vkQueueWaitIdle.  Ordinary
 * Vulkan: it knows nothing of loom (its layer records it).
 */
#include <vulkan/vulkan.h>

#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "work.h"

namespace {

constexpr uint32_t kN = 4096;

#define VK(x) \
  do { \
    if ((x) != VK_SUCCESS) { \
      std::fprintf(stderr, "kineto_drive: %s failed\n", #x); \
      return; \
    } \
  } while (0)

struct Vulkan : Work {
  VkInstance inst{};
  VkPhysicalDevice pd{};
  VkDevice dev{};
  VkQueue q{};
  VkCommandBuffer cb{};
  VkBuffer a{}, b{}, s{};
  VkPipelineLayout layout{};
  VkDescriptorSet set{};
  VkPipeline pipe{};
  bool ok = false;

  uint32_t memtype(uint32_t bits, VkMemoryPropertyFlags want) {
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
      if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
    return 0;
  }

  VkBuffer buffer(VkMemoryPropertyFlags want) {
    VkBufferCreateInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bi.size = kN * 4;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    VkBuffer buf{};
    VkDeviceMemory m{};
    if (vkCreateBuffer(dev, &bi, nullptr, &buf) != VK_SUCCESS) return buf;
    VkMemoryRequirements mr;
    vkGetBufferMemoryRequirements(dev, buf, &mr);
    VkMemoryAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    ai.allocationSize = mr.size;
    ai.memoryTypeIndex = memtype(mr.memoryTypeBits, want);
    vkAllocateMemory(dev, &ai, nullptr, &m);
    vkBindBufferMemory(dev, buf, m, 0);
    return buf;
  }

  VkPipeline pipeline(VkPipelineLayout pl) {
    FILE *f = std::fopen(SHADER_DIR "/scale.spv", "rb");
    if (!f) return VK_NULL_HANDLE;
    std::vector<uint32_t> code(16384);
    size_t n = std::fread(code.data(), 1, code.size() * 4, f);
    std::fclose(f);
    VkShaderModuleCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    ci.codeSize = n;
    ci.pCode = code.data();
    VkShaderModule mod{};
    vkCreateShaderModule(dev, &ci, nullptr, &mod);
    VkComputePipelineCreateInfo pci{};
    pci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    pci.layout = pl;
    pci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    pci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    pci.stage.module = mod;
    pci.stage.pName = "scale";
    VkPipeline p{};
    vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &pci, nullptr, &p);
    return p;
  }

  Vulkan() { setup(); }

  void setup() {
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "kineto_drive";
    app.apiVersion = VK_API_VERSION_1_3; /* timing needs 1.2 (docs/vulkan.md) */
    VkInstanceCreateInfo ici{};
    ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    ici.pApplicationInfo = &app;
    VK(vkCreateInstance(&ici, nullptr, &inst));
    uint32_t npd = 1;
    VkResult rc = vkEnumeratePhysicalDevices(inst, &npd, &pd);
    if ((rc != VK_SUCCESS && rc != VK_INCOMPLETE) || !npd) return;
    uint32_t nf = 8, fam = UINT32_MAX;
    VkQueueFamilyProperties qf[8];
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, qf);
    for (uint32_t i = 0; i < nf && fam == UINT32_MAX; i++)
      if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) fam = i;
    float prio = 1;
    VkDeviceQueueCreateInfo qci{};
    qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    qci.queueFamilyIndex = fam;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    VkDeviceCreateInfo dci{};
    dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    VK(vkCreateDevice(pd, &dci, nullptr, &dev));
    vkGetDeviceQueue(dev, fam, 0, &q);
    s = buffer(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    a = buffer(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    b = buffer(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    VkDescriptorSetLayoutBinding bind[2]{};
    for (uint32_t i = 0; i < 2; i++) {
      bind[i].binding = i;
      bind[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bind[i].descriptorCount = 1;
      bind[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dl{};
    dl.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    dl.bindingCount = 2;
    dl.pBindings = bind;
    VkDescriptorSetLayout dsl{};
    VK(vkCreateDescriptorSetLayout(dev, &dl, nullptr, &dsl));
    VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
    VkPipelineLayoutCreateInfo pl{};
    pl.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &dsl;
    pl.pushConstantRangeCount = 1;
    pl.pPushConstantRanges = &pcr;
    VK(vkCreatePipelineLayout(dev, &pl, nullptr, &layout));
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 2};
    VkDescriptorPoolCreateInfo dp{};
    dp.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    dp.maxSets = 1;
    dp.poolSizeCount = 1;
    dp.pPoolSizes = &ps;
    VkDescriptorPool dpool{};
    VK(vkCreateDescriptorPool(dev, &dp, nullptr, &dpool));
    VkDescriptorSetAllocateInfo dsa{};
    dsa.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    dsa.descriptorPool = dpool;
    dsa.descriptorSetCount = 1;
    dsa.pSetLayouts = &dsl;
    VK(vkAllocateDescriptorSets(dev, &dsa, &set));
    VkDescriptorBufferInfo dbi[2] = {{a, 0, VK_WHOLE_SIZE}, {b, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w{};
    w.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    w.dstSet = set;
    w.descriptorCount = 2;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = dbi;
    vkUpdateDescriptorSets(dev, 1, &w, 0, nullptr);
    pipe = pipeline(layout);
    if (!pipe) return;
    VkCommandPoolCreateInfo cpi{};
    cpi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    cpi.queueFamilyIndex = fam;
    cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    VkCommandPool pool{};
    VK(vkCreateCommandPool(dev, &cpi, nullptr, &pool));
    VkCommandBufferAllocateInfo cai{};
    cai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    cai.commandPool = pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VK(vkAllocateCommandBuffers(dev, &cai, &cb));
    ok = true;
  }


  /* Recorded by each op, as a framework records its work: loom's layer
   * times the commands of buffers recorded while it records. */
  void record() {
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    vkBeginCommandBuffer(cb, &bi);
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT;
    VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdFillBuffer(cb, a, 0, VK_WHOLE_SIZE, 7);
    vkCmdPipelineBarrier(cb, st, st, 0, 1, &mb, 0, nullptr, 0, nullptr);
    uint32_t n = kN;
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, nullptr);
    vkCmdPushConstants(cb, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof n, &n);
    vkCmdDispatch(cb, kN / 64, 1, 1);
    vkCmdPipelineBarrier(cb, st, st, 0, 1, &mb, 0, nullptr, 0, nullptr);
    VkBufferCopy all{0, 0, kN * 4};
    vkCmdCopyBuffer(cb, b, s, 1, &all);
    vkEndCommandBuffer(cb);
  }

  void op(int) override {
    record();
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb;
    vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE);
    vkQueueWaitIdle(q);
  }
};

} // namespace

std::unique_ptr<Work> make_vulkan_work() {
  auto w = std::make_unique<Vulkan>();
  if (w->ok) return w;
  std::fprintf(stderr, "kineto_drive: no usable Vulkan device\n");
  return nullptr;
}
