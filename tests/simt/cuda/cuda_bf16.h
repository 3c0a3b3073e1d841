/* cuda_bf16.h (tests/simt): __nv_bfloat16 as its 16 bits, converted as
 * CUDA does (float to bf16 rounds to nearest even, NaN stays NaN). */
#ifndef HEXI_SIMT_CUDA_BF16_H
#define HEXI_SIMT_CUDA_BF16_H

#include "hexi_bf16.h"

struct __nv_bfloat16 {
	uint16_t x;
};

static inline float __bfloat162float(__nv_bfloat16 h)
{
	return hexi_bf16_to_float(h.x);
}

static inline __nv_bfloat16 __float2bfloat16(float f)
{
	return __nv_bfloat16{hexi_bf16_from_float(f)};
}

#endif
