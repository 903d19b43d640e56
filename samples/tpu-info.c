// SPDX-License-Identifier: MIT
/* tpu-info: print the identity and capabilities of the tpu device. */
#include <stdio.h>
#include <stdlib.h>

#include "tpurt.h"

static void print_size(const char *name, uint64_t bytes)
{
	if (bytes >= (1ull << 30) && !(bytes % (1ull << 30)))
		printf("  %-16s %llu GiB\n", name, (unsigned long long)(bytes >> 30));
	else if (bytes >= (1ull << 20) && !(bytes % (1ull << 20)))
		printf("  %-16s %llu MiB\n", name, (unsigned long long)(bytes >> 20));
	else if (bytes >= (1ull << 10) && !(bytes % (1ull << 10)))
		printf("  %-16s %llu KiB\n", name, (unsigned long long)(bytes >> 10));
	else
		printf("  %-16s %llu bytes\n", name, (unsigned long long)bytes);
}

int main(void)
{
	struct tpurt_device_info info;
	struct tpurt_device *dev;
	int ret;

	ret = tpurt_open(&dev);
	if (ret) {
		fprintf(stderr, "tpu-info: %s\n", tpurt_last_error());
		return EXIT_FAILURE;
	}
	ret = tpurt_device_info(dev, &info);
	if (ret) {
		fprintf(stderr, "tpu-info: %s\n", tpurt_last_error());
		tpurt_close(dev);
		return EXIT_FAILURE;
	}

	printf("%s: driver %s, tpu-mxu register ABI %u.%u\n", info.node,
	       info.driver, info.hw_version >> 16, info.hw_version & 0xffff);
	print_size("HBM", info.hbm_size);
	print_size("VMEM", info.vmem_size);
	print_size("VMEM limit", info.vmem_limit);
	print_size("SMEM", info.smem_size);
	printf("  %-16s %u\n", "cores", info.cores);
	printf("  %-16s %u x %ux%u\n", "MXUs per core", info.mxu_count,
	       info.mxu_dim, info.mxu_dim);
	printf("Modeled chip (timing model; not the host's speed):\n");
	printf("  %-16s %.1f TFLOP/s\n", "peak bf16", info.peak_flops_bf16 / 1e12);
	printf("  %-16s %.1f TFLOP/s\n", "peak f32", info.peak_flops_f32 / 1e12);
	printf("  %-16s %.1f TOP/s\n", "peak int8", info.peak_ops_int8 / 1e12);
	printf("  %-16s %.1f GB/s\n", "HBM bandwidth", info.hbm_bandwidth / 1e9);
	printf("  %-16s %llu ns\n", "grid step cost",
	       (unsigned long long)info.step_cost_ns);
	printf("  %-16s %llu ns\n", "job launch cost",
	       (unsigned long long)info.launch_cost_ns);
	printf("  %-16s %.0f FLOP/byte (bf16)\n", "ridge point",
	       (double)info.peak_flops_bf16 / info.hbm_bandwidth);

	tpurt_close(dev);
	return EXIT_SUCCESS;
}
