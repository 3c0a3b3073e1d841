/*
 * hexi_bf16.h - bfloat16 bits <-> float, as CUDA's __float2bfloat16 and
 * __bfloat162float convert: round to nearest even, NaN stays a quiet NaN.
 * One definition for the host code of the GPU path (the profiler's GEMM
 * inputs) and the GPU tests and emulations.  Header-only.
 */
#ifndef HEXI_BF16_H
#define HEXI_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint16_t hexi_bf16_from_float(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float hexi_bf16_to_float(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

#endif /* HEXI_BF16_H */
