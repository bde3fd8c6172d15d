#!/bin/sh
# One rank under loom record: rank.sh LOOM DIR PROGRAM...; the trace goes to
# DIR/rank<R>.json.  LOOM_TEST_SHIFT_RANK1 becomes rank 1's
# LOOM_TEST_CLOCK_SHIFT (the other ranks keep the real clock).
loom=$1 dir=$2
shift 2
r=${OMPI_COMM_WORLD_RANK:?not started by OpenMPI mpirun}
if [ "$r" = 1 ] && [ -n "$LOOM_TEST_SHIFT_RANK1" ]; then
  export LOOM_TEST_CLOCK_SHIFT="$LOOM_TEST_SHIFT_RANK1"
fi
exec "$loom" record --devices cpu,mpi -o "$dir/rank$r.json" -- "$@"
