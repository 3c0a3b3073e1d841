/* nccl.c - the runtime's NCCL backend built into test_nccl directly (the
 * test supplies a single-process bootstrap and the group cache). */
#include "comm_nccl.c"
