/*
 * fakenvml.c - a stand-in for libnvidia-ml.so.1 for tests/spank/nvml.sh:
 * the few entry points the plugin loads, every GPU reporting the name in
 * FAKE_NAME (an RTX 4090), so the type check passes on the rtx4090 node of
 * the test cluster and fails on the others.
 */
#include "config.h"

#include <string.h>

#define FAKE_NAME "NVIDIA GeForce RTX 4090"

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device);
int nvmlDeviceGetName(void *device, char *name, unsigned int len);

static int devices[64];

int nvmlInit_v2(void)
{
	return 0;
}

int nvmlShutdown(void)
{
	return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device)
{
	if (index >= 64)
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	*device = &devices[index];
	return 0;
}

int nvmlDeviceGetName(void *device, char *name, unsigned int len)
{
	if (device == NULL || len < sizeof(FAKE_NAME))
		return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
	memcpy(name, FAKE_NAME, sizeof(FAKE_NAME));
	return 0;
}
