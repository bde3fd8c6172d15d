/* A stand-in libcuda.so.1 for a machine with a driver but no device: the
 * CUPTI backend's probe must report "no CUDA device". */
__attribute__((visibility("default"))) int cuInit(unsigned flags) {
  (void)flags;
  return 100; /* CUDA_ERROR_NO_DEVICE */
}
