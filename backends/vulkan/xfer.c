/*
 * xfer.c - images and the transfers that touch them: image copies, copies
 * between buffers and images, blits, colour clears, and the Vulkan 1.3
 * ("2") forms of these and of the buffer copy.  Each is recorded like a
 * buffer copy (timed by two of the recording's queries) with "bytes" when
 * the layer knows the image format's size, "texels" (every sample), and
 * "direction" (an image counts as the host's when its memory does).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "vk.h"

/* ---- formats ------------------------------------------------------------- */
/* Bytes of a texel of f, or of a block of bw x bh texels for block-compressed
 * formats; 0 when the layer cannot size it (combined depth/stencil, ASTC,
 * planar and extension formats: their transfers carry texels only). */
static uint32_t format_bytes(VkFormat f, uint32_t *bw, uint32_t *bh) {
  static const struct { int lo, hi; uint8_t bytes, block; } t[] = {
      {1, 1, 1, 1},     {2, 8, 2, 1},     {9, 15, 1, 1},    {16, 22, 2, 1},   {23, 36, 3, 1},
      {37, 69, 4, 1},   {70, 76, 2, 1},   {77, 83, 4, 1},   {84, 90, 6, 1},   {91, 97, 8, 1},
      {98, 100, 4, 1},  {101, 103, 8, 1}, {104, 106, 12, 1}, {107, 109, 16, 1}, {110, 112, 8, 1},
      {113, 115, 16, 1}, {116, 118, 24, 1}, {119, 121, 32, 1}, {122, 123, 4, 1}, {124, 124, 2, 1},
      {125, 126, 4, 1}, {127, 127, 1, 1}, {131, 134, 8, 4}, {135, 138, 16, 4}, {139, 140, 8, 4},
      {141, 146, 16, 4}, {147, 150, 8, 4}, {151, 152, 16, 4}, {153, 154, 8, 4}, {155, 156, 16, 4}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if ((int)f >= t[i].lo && (int)f <= t[i].hi) {
      *bw = *bh = t[i].block;
      return t[i].bytes;
    }
  return 0;
}

/* ---- the image table ------------------------------------------------------- */
/* What the layer knows of img (a copy, taken under d->mu); 0 when unknown. */
static int image(vk_dev *d, VkImage img, vk_img *out) {
  pthread_mutex_lock(&d->mu);
  const vk_img *i = vk_map_get(&d->images, VK_KEY(img));
  if (i) *out = *i;
  pthread_mutex_unlock(&d->mu);
  return i != NULL;
}

static VkResult VKAPI_CALL L_CreateImage(VkDevice dev, const VkImageCreateInfo *ci,
                                         const VkAllocationCallbacks *a, VkImage *out) {
  vk_dev *d = vk_dev_of(dev);
  VkResult rc = d->f.CreateImage(dev, ci, a, out);
  vk_img *i = rc == VK_SUCCESS ? calloc(1, sizeof *i) : NULL;
  if (!i) return rc;
  *i = (vk_img){ci->format, ci->extent, ci->mipLevels, ci->arrayLayers, (uint32_t)ci->samples, 0};
  if (vk_dev_put(d, &d->images, VK_KEY(*out), i)) free(i);
  return rc;
}

static void VKAPI_CALL L_DestroyImage(VkDevice dev, VkImage img, const VkAllocationCallbacks *a) {
  vk_dev *d = vk_dev_of(dev);
  free(vk_dev_del(d, &d->images, VK_KEY(img)));
  d->f.DestroyImage(dev, img, a);
}

static VkResult VKAPI_CALL L_BindImageMemory(VkDevice dev, VkImage img, VkDeviceMemory mem,
                                             VkDeviceSize off) {
  vk_dev *d = vk_dev_of(dev);
  VkResult rc = d->f.BindImageMemory(dev, img, mem, off);
  pthread_mutex_lock(&d->mu);
  vk_img *i = rc == VK_SUCCESS ? vk_map_get(&d->images, VK_KEY(img)) : NULL;
  if (i) i->mem = mem;
  pthread_mutex_unlock(&d->mu);
  return rc;
}

/* ---- sizes ------------------------------------------------------------------ */
typedef struct size_acc {
  uint64_t texels, bytes; /* bytes: VK_BYTES_UNKNOWN once a part cannot be sized */
} size_acc;

/* Adds a box of w x h x d texels in `layers` layers of an image to a. */
static void add_box(size_acc *a, const vk_img *im, uint32_t w, uint32_t h, uint32_t d,
                    uint32_t layers) {
  uint64_t samples = im && im->samples ? im->samples : 1;
  a->texels += (uint64_t)w * h * d * layers * samples;
  uint32_t bw = 1, bh = 1, b = im ? format_bytes(im->format, &bw, &bh) : 0;
  if (!b) a->bytes = VK_BYTES_UNKNOWN;
  else if (a->bytes != VK_BYTES_UNKNOWN)
    a->bytes += (uint64_t)((w + bw - 1) / bw) * ((h + bh - 1) / bh) * d * layers * samples * b;
}

static uint32_t span(int32_t a, int32_t b) {
  return (uint32_t)(a > b ? (int64_t)a - b : (int64_t)b - a);
}

static uint32_t layers_of(const vk_img *im, uint32_t base, uint32_t count) {
  if (count != VK_REMAINING_ARRAY_LAYERS) return count;
  return im && im->layers > base ? im->layers - base : 1;
}

static int img_host(vk_dev *d, const vk_img *im) { return im->mem && vk_mem_on_host(d, im->mem); }

/* Appends the transfer to c's recording; its index or SIZE_MAX. */
static size_t begin(vk_cb *c, uint16_t kind, uint32_t name, size_acc a, int src_host,
                    int dst_host) {
  size_t i = vk_mem_begin(c, kind, name, a.bytes, vk_direction(src_host, dst_host));
  if (i != SIZE_MAX) c->rec->cmds[i].texels = a.texels;
  return i;
}

/* An image and what the layer knows of it (known 0: nothing). */
typedef struct img_ref {
  vk_img i;
  int known;
} img_ref;

static img_ref ref(vk_dev *d, VkImage img) {
  img_ref r = {{0}, 0};
  r.known = image(d, img, &r.i);
  return r;
}

static const vk_img *known(const img_ref *r) { return r->known ? &r->i : NULL; }
static int on_host(vk_dev *d, const img_ref *r) { return r->known && img_host(d, &r->i); }

/* ---- the commands -------------------------------------------------------------- */
#define COPY_IMAGE_SIZE(a, im, r, n)                                                               \
  for (uint32_t k_ = 0; k_ < (n); k_++)                                                            \
    add_box(&(a), known(&(im)), (r)[k_].extent.width, (r)[k_].extent.height, (r)[k_].extent.depth, \
            layers_of(known(&(im)), (r)[k_].srcSubresource.baseArrayLayer,                         \
                      (r)[k_].srcSubresource.layerCount))
#define BUFFER_IMAGE_SIZE(a, im, r, n)                                                             \
  for (uint32_t k_ = 0; k_ < (n); k_++)                                                            \
    add_box(&(a), known(&(im)), (r)[k_].imageExtent.width, (r)[k_].imageExtent.height,             \
            (r)[k_].imageExtent.depth,                                                             \
            layers_of(known(&(im)), (r)[k_].imageSubresource.baseArrayLayer,                       \
                      (r)[k_].imageSubresource.layerCount))
#define BLIT_SIZE(a, im, r, n)                                                                     \
  for (uint32_t k_ = 0; k_ < (n); k_++)                                                            \
    add_box(&(a), known(&(im)), span((r)[k_].dstOffsets[1].x, (r)[k_].dstOffsets[0].x),            \
            span((r)[k_].dstOffsets[1].y, (r)[k_].dstOffsets[0].y),                                \
            span((r)[k_].dstOffsets[1].z, (r)[k_].dstOffsets[0].z),                                \
            layers_of(known(&(im)), (r)[k_].dstSubresource.baseArrayLayer,                         \
                      (r)[k_].dstSubresource.layerCount))

static void VKAPI_CALL L_CmdCopyImage(VkCommandBuffer cb, VkImage src, VkImageLayout sl,
                                      VkImage dst, VkImageLayout dl, uint32_t n,
                                      const VkImageCopy *r) {
  vk_cb *c = vk_cb_recording(cb);
  size_t i = SIZE_MAX;
  if (c) {
    img_ref s = ref(c->d, src), t = ref(c->d, dst);
    size_acc a = {0, 0};
    COPY_IMAGE_SIZE(a, s, r, n);
    i = begin(c, LOOM_KIND_MEMCPY, VK_NAME("vkCmdCopyImage"), a, on_host(c->d, &s),
              on_host(c->d, &t));
  }
  vk_dev_of(cb)->f.CmdCopyImage(cb, src, sl, dst, dl, n, r);
  if (c) vk_cmd_end(c, i);
}

static void VKAPI_CALL L_CmdCopyImage2(VkCommandBuffer cb, const VkCopyImageInfo2 *ci) {
  vk_cb *c = vk_cb_recording(cb);
  size_t i = SIZE_MAX;
  if (c) {
    img_ref s = ref(c->d, ci->srcImage), t = ref(c->d, ci->dstImage);
    size_acc a = {0, 0};
    COPY_IMAGE_SIZE(a, s, ci->pRegions, ci->regionCount);
    i = begin(c, LOOM_KIND_MEMCPY, VK_NAME("vkCmdCopyImage2"), a, on_host(c->d, &s),
              on_host(c->d, &t));
  }
  vk_dev_of(cb)->f.CmdCopyImage2(cb, ci);
  if (c) vk_cmd_end(c, i);
}

static void VKAPI_CALL L_CmdCopyBufferToImage(VkCommandBuffer cb, VkBuffer src, VkImage dst,
                                              VkImageLayout dl, uint32_t n,
                                              const VkBufferImageCopy *r) {
  vk_cb *c = vk_cb_recording(cb);
  size_t i = SIZE_MAX;
  if (c) {
    img_ref t = ref(c->d, dst);
    size_acc a = {0, 0};
    BUFFER_IMAGE_SIZE(a, t, r, n);
    i = begin(c, LOOM_KIND_MEMCPY, VK_NAME("vkCmdCopyBufferToImage"), a, vk_buf_on_host(c->d, src),
              on_host(c->d, &t));
  }
  vk_dev_of(cb)->f.CmdCopyBufferToImage(cb, src, dst, dl, n, r);
  if (c) vk_cmd_end(c, i);
}

static void VKAPI_CALL L_CmdCopyBufferToImage2(VkCommandBuffer cb,
                                               const VkCopyBufferToImageInfo2 *ci) {
  vk_cb *c = vk_cb_recording(cb);
  size_t i = SIZE_MAX;
  if (c) {
    img_ref t = ref(c->d, ci->dstImage);
    size_acc a = {0, 0};
    BUFFER_IMAGE_SIZE(a, t, ci->pRegions, ci->regionCount);
    i = begin(c, LOOM_KIND_MEMCPY, VK_NAME("vkCmdCopyBufferToImage2"), a,
              vk_buf_on_host(c->d, ci->srcBuffer), on_host(c->d, &t));
  }
  vk_dev_of(cb)->f.CmdCopyBufferToImage2(cb, ci);
  if (c) vk_cmd_end(c, i);
}

static void VKAPI_CALL L_CmdCopyImageToBuffer(VkCommandBuffer cb, VkImage src, VkImageLayout sl,
                                              VkBuffer dst, uint32_t n,
                                              const VkBufferImageCopy *r) {
  vk_cb *c = vk_cb_recording(cb);
  size_t i = SIZE_MAX;
  if (c) {
    img_ref s = ref(c->d, src);
    size_acc a = {0, 0};
    BUFFER_IMAGE_SIZE(a, s, r, n);
    i = begin(c, LOOM_KIND_MEMCPY, VK_NAME("vkCmdCopyImageToBuffer"), a, on_host(c->d, &s),
              vk_buf_on_host(c->d, dst));
  }
  vk_dev_of(cb)->f.CmdCopyImageToBuffer(cb, src, sl, dst, n, r);
  if (c) vk_cmd_end(c, i);
}

static void VKAPI_CALL L_CmdCopyImageToBuffer2(VkCommandBuffer cb,
                                               const VkCopyImageToBufferInfo2 *ci) {
  vk_cb *c = vk_cb_recording(cb);
  size_t i = SIZE_MAX;
  if (c) {
    img_ref s = ref(c->d, ci->srcImage);
    size_acc a = {0, 0};
    BUFFER_IMAGE_SIZE(a, s, ci->pRegions, ci->regionCount);
    i = begin(c, LOOM_KIND_MEMCPY, VK_NAME("vkCmdCopyImageToBuffer2"), a, on_host(c->d, &s),
              vk_buf_on_host(c->d, ci->dstBuffer));
  }
  vk_dev_of(cb)->f.CmdCopyImageToBuffer2(cb, ci);
  if (c) vk_cmd_end(c, i);
}

/* A blit's size is what it writes: the destination regions. */
static void VKAPI_CALL L_CmdBlitImage(VkCommandBuffer cb, VkImage src, VkImageLayout sl,
                                      VkImage dst, VkImageLayout dl, uint32_t n,
                                      const VkImageBlit *r, VkFilter f) {
  vk_cb *c = vk_cb_recording(cb);
  size_t i = SIZE_MAX;
  if (c) {
    img_ref s = ref(c->d, src), t = ref(c->d, dst);
    size_acc a = {0, 0};
    BLIT_SIZE(a, t, r, n);
    i = begin(c, LOOM_KIND_MEMCPY, VK_NAME("vkCmdBlitImage"), a, on_host(c->d, &s),
              on_host(c->d, &t));
  }
  vk_dev_of(cb)->f.CmdBlitImage(cb, src, sl, dst, dl, n, r, f);
  if (c) vk_cmd_end(c, i);
}

static void VKAPI_CALL L_CmdBlitImage2(VkCommandBuffer cb, const VkBlitImageInfo2 *bi) {
  vk_cb *c = vk_cb_recording(cb);
  size_t i = SIZE_MAX;
  if (c) {
    img_ref s = ref(c->d, bi->srcImage), t = ref(c->d, bi->dstImage);
    size_acc a = {0, 0};
    BLIT_SIZE(a, t, bi->pRegions, bi->regionCount);
    i = begin(c, LOOM_KIND_MEMCPY, VK_NAME("vkCmdBlitImage2"), a, on_host(c->d, &s),
              on_host(c->d, &t));
  }
  vk_dev_of(cb)->f.CmdBlitImage2(cb, bi);
  if (c) vk_cmd_end(c, i);
}

/* A clear writes every mip level and layer of its ranges. */
static void VKAPI_CALL L_CmdClearColorImage(VkCommandBuffer cb, VkImage img, VkImageLayout l,
                                            const VkClearColorValue *v, uint32_t n,
                                            const VkImageSubresourceRange *r) {
  vk_cb *c = vk_cb_recording(cb);
  size_t i = SIZE_MAX;
  if (c) {
    img_ref t = ref(c->d, img);
    size_acc a = {0, 0};
    for (uint32_t k = 0; k < n && t.known; k++) {
      uint32_t levels = r[k].levelCount == VK_REMAINING_MIP_LEVELS
                            ? (t.i.levels > r[k].baseMipLevel ? t.i.levels - r[k].baseMipLevel : 0)
                            : r[k].levelCount;
      uint32_t layers = layers_of(&t.i, r[k].baseArrayLayer, r[k].layerCount);
      for (uint32_t m = r[k].baseMipLevel; m < r[k].baseMipLevel + levels && m < 32; m++) {
        uint32_t w = t.i.extent.width >> m, h = t.i.extent.height >> m, d = t.i.extent.depth >> m;
        add_box(&a, &t.i, w ? w : 1, h ? h : 1, d ? d : 1, layers);
      }
    }
    if (!t.known) a.bytes = VK_BYTES_UNKNOWN;
    i = begin(c, LOOM_KIND_MEMSET, VK_NAME("vkCmdClearColorImage"), a, on_host(c->d, &t),
              on_host(c->d, &t));
  }
  vk_dev_of(cb)->f.CmdClearColorImage(cb, img, l, v, n, r);
  if (c) vk_cmd_end(c, i);
}

static void VKAPI_CALL L_CmdCopyBuffer2(VkCommandBuffer cb, const VkCopyBufferInfo2 *ci) {
  vk_cb *c = vk_cb_recording(cb);
  size_t i = SIZE_MAX;
  if (c) {
    size_acc a = {0, 0};
    for (uint32_t k = 0; k < ci->regionCount; k++) a.bytes += ci->pRegions[k].size;
    i = begin(c, LOOM_KIND_MEMCPY, VK_NAME("vkCmdCopyBuffer2"), a,
              vk_buf_on_host(c->d, ci->srcBuffer), vk_buf_on_host(c->d, ci->dstBuffer));
  }
  vk_dev_of(cb)->f.CmdCopyBuffer2(cb, ci);
  if (c) vk_cmd_end(c, i);
}

PFN_vkVoidFunction vk_xfer_proc(const char *name) {
#define P(n) if (!strcmp(name, "vk" #n)) return (PFN_vkVoidFunction)L_##n;
  P(CreateImage)
  P(DestroyImage) P(BindImageMemory) P(CmdCopyImage) P(CmdCopyBufferToImage) P(CmdCopyImageToBuffer)
      P(CmdBlitImage) P(CmdClearColorImage)
#undef P
  /* Vulkan 1.3, or VK_KHR_copy_commands2 under its own names */
#define P2(n)                                                                                      \
  if (!strcmp(name, "vk" #n) || !strcmp(name, "vk" #n "KHR")) return (PFN_vkVoidFunction)L_##n;
          P2(CmdCopyBuffer2) P2(CmdCopyImage2) P2(CmdCopyBufferToImage2) P2(CmdCopyImageToBuffer2)
              P2(CmdBlitImage2)
#undef P2
                  return NULL;
}
