/*
 * train.c - the bundled example workload: trains a small two-layer network
 * (real matrix arithmetic on the CPU) on a synthetic regression task, and
 * mirrors each operator on the simulated accelerator of libloom-sim.so, the
 * way a framework dispatches ops to a device.  It marks framework ops,
 * phases and iterations with loom's API and records a trace of the run.
 *
 * usage: loom-sim-train [OUT.json] [ITERATIONS]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"
#include "simrt.h"

enum { BATCH = 64, IN = 128, HID = 256, OUT = 16 };

static float w1[IN * HID], w2[HID * OUT], x[BATCH * IN], y[BATCH * OUT];
static float h[BATCH * HID], o[BATCH * OUT], gh[BATCH * HID], go[BATCH * OUT];
static uint64_t next_op = 1;

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 9) & 0xffff) / 65536.0f - 0.5f;
}

/* c[m x n] = a[m x k] * b[k x n] (optionally with a or b transposed) */
static void matmul(const float *a, const float *b, float *c, int m, int k, int n,
                   int ta, int tb) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float s = 0;
      for (int p = 0; p < k; p++)
        s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = s;
    }
}

/* A framework op: host work plus the mirrored kernel on the device. */
#define OP(name, flops, body)                                                  \
  do {                                                                         \
    loom_op_begin(name, next_op++);                                            \
    body;                                                                      \
    simrt_launch(0, name "_kernel", 2000 + (uint64_t)(flops) / 50, 64, 256);   \
    loom_op_end();                                                             \
  } while (0)

static float train_step(float lr) {
  loom_range_push("forward");
  OP("aten::mm", 2.0 * BATCH * IN * HID, matmul(x, w1, h, BATCH, IN, HID, 0, 0));
  OP("aten::relu", BATCH * HID, for (int i = 0; i < BATCH * HID; i++) h[i] = h[i] > 0 ? h[i] : 0);
  OP("aten::mm", 2.0 * BATCH * HID * OUT, matmul(h, w2, o, BATCH, HID, OUT, 0, 0));
  float loss = 0;
  OP("aten::mse_loss", BATCH * OUT, {
    for (int i = 0; i < BATCH * OUT; i++) {
      go[i] = 2 * (o[i] - y[i]) / (BATCH * OUT);
      loss += (o[i] - y[i]) * (o[i] - y[i]);
    }
  });
  loom_range_pop();
  loom_range_push("backward");
  static float gw2[HID * OUT], gw1[IN * HID];
  OP("aten::mm", 2.0 * HID * BATCH * OUT, matmul(h, go, gw2, HID, BATCH, OUT, 1, 0));
  OP("aten::mm", 2.0 * BATCH * OUT * HID, matmul(go, w2, gh, BATCH, OUT, HID, 0, 1));
  OP("aten::threshold_backward", BATCH * HID,
     for (int i = 0; i < BATCH * HID; i++) if (h[i] <= 0) gh[i] = 0);
  OP("aten::mm", 2.0 * IN * BATCH * HID, matmul(x, gh, gw1, IN, BATCH, HID, 1, 0));
  loom_range_pop();
  loom_range_push("optimizer.step");
  OP("aten::add_", IN * HID + HID * OUT, {
    for (int i = 0; i < IN * HID; i++) w1[i] -= lr * gw1[i];
    for (int i = 0; i < HID * OUT; i++) w2[i] -= lr * gw2[i];
  });
  loom_range_pop();
  return loss / (BATCH * OUT);
}

int main(int argc, char **argv) {
  const char *out = argc > 1 ? argv[1] : "loom-sim-train.json";
  int iters = argc > 2 ? atoi(argv[2]) : 20;
  unsigned seed = 42;
  for (int i = 0; i < IN * HID; i++) w1[i] = frand(&seed) * 0.2f;
  for (int i = 0; i < HID * OUT; i++) w2[i] = frand(&seed) * 0.2f;

  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,sim",
                             .name = "loom-sim-train"};
  loom_session *s;
  loom_status st = loom_session_create(&cfg, &s);
  if (st != LOOM_OK) {
    fprintf(stderr, "loom_session_create: %s: %s\n", loom_strerror(st), loom_last_error());
    return 1;
  }
  loom_session_start(s);
  float loss = 0;
  for (int it = 0; it < iters; it++) {
    loom_step();
    loom_range_push("data");
    for (int i = 0; i < BATCH * IN; i++) x[i] = frand(&seed);
    for (int i = 0; i < BATCH; i++)
      for (int j = 0; j < OUT; j++) y[i * OUT + j] = sinf(x[i * IN + j]) + x[i * IN + j + OUT];
    simrt_memcpy(1, SIMRT_H2D, sizeof x + sizeof y);
    loom_range_pop();
    loss = train_step(0.05f);
    loom_counter("loss", loss);
    simrt_memcpy(1, SIMRT_D2H, sizeof(float));
    simrt_synchronize(0);
  }
  loom_trace *t;
  st = loom_session_stop(s, &t);
  loom_session_destroy(s);
  if (st != LOOM_OK) {
    fprintf(stderr, "loom_session_stop: %s\n", loom_last_error());
    return 1;
  }
  st = loom_trace_save(t, out);
  if (st != LOOM_OK) {
    fprintf(stderr, "loom_trace_save: %s\n", loom_last_error());
    loom_trace_free(t);
    return 1;
  }
  loom_trace_summary sum = {.struct_size = sizeof sum};
  loom_trace_summarize(t, &sum);
  printf("trained %d iterations, final loss %.4f\n", iters, loss);
  printf("trace %s: %llu events, %llu flows, %llu devices, %llu dropped, %llu warnings, %.1f ms\n",
         out, (unsigned long long)sum.events, (unsigned long long)sum.flows,
         (unsigned long long)sum.devices, (unsigned long long)sum.dropped,
         (unsigned long long)sum.warnings, (sum.end_ns - sum.start_ns) / 1e6);
  loom_trace_free(t);
  return 0;
}
