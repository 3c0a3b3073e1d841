/*
 * nccl.h (tests/simt) - the part of NCCL's API that runtime/comm_nccl.c
 * uses, implemented over MPI on the emulated streams by tests/simt/
 * nccl_mpi.c.  Names and values follow NCCL 2.2x; only what comm_nccl.c
 * calls is here.  Never installed; see tests/simt/Makefile.am.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <stddef.h>

#include "cuda_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm *ncclComm_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
	char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclNumResults = 8
} ncclResult_t;

typedef enum {
	ncclInt8 = 0,
	ncclChar = 0,
	ncclUint8 = 1,
	ncclInt32 = 2,
	ncclInt = 2,
	ncclUint32 = 3,
	ncclInt64 = 4,
	ncclUint64 = 5,
	ncclFloat16 = 6,
	ncclHalf = 6,
	ncclFloat32 = 7,
	ncclFloat = 7,
	ncclFloat64 = 8,
	ncclDouble = 8,
	ncclBfloat16 = 9,
	ncclNumTypes = 10
} ncclDataType_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3 } ncclRedOp_t;

typedef struct ncclConfig_v21700 {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                \
	{sizeof(ncclConfig_t), 0xcafebeef, 0, 1}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
				    ncclUniqueId id, int rank,
				    ncclConfig_t *config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
const char *ncclGetErrorString(ncclResult_t r);
const char *ncclGetLastError(ncclComm_t comm);

ncclResult_t ncclAllReduce(const void *sendbuf, void *recvbuf, size_t count,
			   ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
			   cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *sendbuf, void *recvbuf,
			       size_t recvcount, ncclDataType_t type,
			       ncclRedOp_t op, ncclComm_t comm,
			       cudaStream_t stream);
ncclResult_t ncclReduce(const void *sendbuf, void *recvbuf, size_t count,
			ncclDataType_t type, ncclRedOp_t op, int root,
			ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void *sendbuf, void *recvbuf,
			   size_t sendcount, ncclDataType_t type,
			   ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuf, void *recvbuf, size_t count,
			   ncclDataType_t type, int root, ncclComm_t comm,
			   cudaStream_t stream);
ncclResult_t ncclSend(const void *sendbuf, size_t count, ncclDataType_t type,
		      int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuf, size_t count, ncclDataType_t type,
		      int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#ifdef __cplusplus
}
#endif

#endif
