/*
 * sim.c - survive_sim N: N ranges "step", each around one kernel launch on
 * the simulated device of libloom-sim.so (its runtime call is handed to
 * loom at once; its device work is buffered by the runtime until flush),
 * then SIGKILL.  The ranges survive; the backend's records are counted lost.
 */
#include <signal.h>
#include <stdlib.h>

#include "loom/loom.h"
#include "simrt.h"

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  for (int i = 0; i < n; i++) {
    loom_range_push("step");
    simrt_launch(0, "kernel", 1000, 1, 1);
    loom_range_pop();
  }
  raise(SIGKILL);
  return 1;
}
