/*
 * test_peak.c - the peak-FLOPS lookup by the exact names NVML (nvidia-smi,
 * cudaGetDeviceProperties) reports: the catalog entry bench_gpu_train and
 * the cost model use, its dense BF16 peak, and the profiler's type guess
 * resolving to the same entry.  Needs no GPU.
 */
#include "config.h"

#include <string.h>

#include "hexi_prof.h"
#include "hexi_sched.h"
#include "tap.h"

int main(void)
{
	static const struct {
		const char *nvml, *type;
		double peak_tflops;
	} t[] = {
	    {"NVIDIA H200", "h200", 989.4},
	    {"NVIDIA H200 NVL", "h200-nvl", 835.5},
	    {"NVIDIA H100 80GB HBM3", "h100-sxm", 989.4},
	    {"NVIDIA H100 PCIe", "h100-pcie", 756.0},
	    {"NVIDIA H100 NVL", "h100-nvl", 835.5},
	    {"NVIDIA A100-SXM4-80GB", "a100-80g", 312.0},
	    {"NVIDIA A100 80GB PCIe", "a100-80g", 312.0},
	    {"NVIDIA A100-SXM4-40GB", "a100-40g", 312.0},
	    {"NVIDIA A100-PCIE-40GB", "a100-40g", 312.0},
	    {"NVIDIA L40S", "l40s", 362.05},
	    {"NVIDIA GeForce RTX 4090", "rtx4090", 165.2},
	};
	hexi_catalog *cat = NULL;
	size_t n = sizeof(t) / sizeof(t[0]);

	is_int(hexi_catalog_builtin(&cat), HEXI_OK, "built-in catalog");
	if (cat == NULL)
		tap_bail("no catalog");
	for (size_t i = 0; i < n; i++) {
		const hexi_gpu_type *g = hexi_catalog_find(cat, t[i].nvml);
		const hexi_gpu_type *h =
		    hexi_catalog_find(cat, hexi_prof_gpu_type_guess(t[i].nvml));

		ok(g != NULL && strcmp(g->name, t[i].type) == 0,
		   "'%s' is %s (got %s)", t[i].nvml, t[i].type,
		   g != NULL ? g->name : "no entry");
		ok(g != NULL && g->peak_tflops == t[i].peak_tflops,
		   "'%s': peak %.2f TFLOP/s (want %.2f)", t[i].nvml,
		   g ? g->peak_tflops : 0.0, t[i].peak_tflops);
		ok(g != NULL && h == g,
		   "'%s': the profiler's type '%s' is the same entry",
		   t[i].nvml, hexi_prof_gpu_type_guess(t[i].nvml));
	}
	hexi_catalog_destroy(cat);
	return tap_done();
}
