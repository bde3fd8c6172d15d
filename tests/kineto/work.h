/*
 * work.h - the device workloads kineto_drive runs inside its ops: ordinary
 * runtime code that knows nothing of loom or Kineto (work.cpp).
 */
#ifndef KINETO_DRIVE_WORK_H
#define KINETO_DRIVE_WORK_H

#include <memory>

struct Work {
  virtual ~Work() = default;
  virtual void op(int i) = 0; /* one op's device work */
  virtual void sync() {}      /* wait for all of it */
};

/* "opencl": per op a write, a kernel and a read on one in-order queue;
 * "vulkan": per op one submission of a fill, a dispatch and a copy
 * (work_vk.cpp); "fakert": the example runtime (examples/fakert) dlopen()ed now, per op a
 * kernel and a copy then frt_finish; "none": nothing; "a,b": a then b in
 * each op.  nullptr: unknown
 * or unusable here (the reason on stderr). */
std::unique_ptr<Work> make_work(const char *name);

#endif
