/*
 * gpu_emu.h - test-only extras of the host emulation of rt_cuda.h
 * (gpu_emu.c); the emulated functions themselves are declared in
 * runtime/cuda/rt_cuda.h and runtime/rt_comm.h.
 */
#ifndef HEXI_GPU_EMU_H
#define HEXI_GPU_EMU_H

/* Stream races seen so far (accesses a GPU would not order; see the
 * stream-order checker in gpu_emu.c). */
unsigned long gpu_emu_races(void);

/* Calls of the emulated cuDNN attention (rt_cuda_sdpa_forward/backward). */
unsigned long gpu_emu_sdpa_calls(void);

#endif
