/* cuda_bf16.h (tests/simt): __nv_bfloat16 as its 16 bits, converted as
 * CUDA does (float to bf16 rounds to nearest even, NaN stays NaN). */
#ifndef HEXI_SIMT_CUDA_BF16_H
#define HEXI_SIMT_CUDA_BF16_H

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
	uint16_t x;
};

static inline float __bfloat162float(__nv_bfloat16 h)
{
	uint32_t u = (uint32_t)h.x << 16;
	float f;

	std::memcpy(&f, &u, sizeof(f));
	return f;
}

static inline __nv_bfloat16 __float2bfloat16(float f)
{
	uint32_t u;
	__nv_bfloat16 h;

	std::memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		h.x = (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
	else
		h.x = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
	return h;
}

#endif
