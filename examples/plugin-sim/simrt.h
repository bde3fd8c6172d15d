/*
 * simrt.h - the API of a simulated accelerator runtime, shipped in the same
 * library as its loom backend (libloom-sim.so).  It plays the part of a
 * vendor runtime (OpenCL, CUDA, Level Zero): programs launch kernels and
 * copies on queues; the device executes them in order, on its own clock.
 * Nothing is computed: durations are what the caller asks for.
 */
#ifndef SIMRT_H
#define SIMRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SIMRT_QUEUES 2

enum simrt_copy { SIMRT_H2D = 1, SIMRT_D2H = 2, SIMRT_D2D = 3 };

/* Each call returns its correlation id (> 0).  q is 0 or 1. */
uint64_t simrt_launch(int q, const char *kernel, uint64_t dur_ns,
                      uint32_t grid, uint32_t block);
uint64_t simrt_memcpy(int q, enum simrt_copy dir, size_t bytes);
uint64_t simrt_memset(int q, size_t bytes);
/* Waits (on the host) until queue q has finished its work. */
uint64_t simrt_synchronize(int q);
/* The device clock now (ns ticks, skewed and offset from the host). */
uint64_t simrt_device_now(void);

#ifdef __cplusplus
}
#endif
#endif
