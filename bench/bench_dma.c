// SPDX-License-Identifier: MIT
/*
 * DMA bandwidth, in the guest: host <-> HBM copies of 1 MiB .. 256 MiB.
 * End to end is bytes over the ioctl's wall time (pinning, SG list, queue,
 * interrupt, wait); device-side is bytes over the device's own busy time
 * for those copies (DRM_TPU_PARAM_DMA_BUSY_NS). One line per figure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpurt.h"

#define MiB (1ull << 20)
#define MAX_SIZE (256 * MiB)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t param(struct tpurt_device *dev, uint32_t p)
{
	struct drm_tpu_get_param args = { .param = p };

	if (drmIoctl(tpurt_device_fd(dev), DRM_IOCTL_TPU_GET_PARAM, &args)) {
		perror("GET_PARAM");
		exit(1);
	}
	return args.value;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median end-to-end and device-side GB/s of @reps copies of @size bytes. */
static int measure(struct tpurt_device *dev, struct tpurt_buffer *buf,
		   uint8_t *host, uint64_t size, int to_device, int reps,
		   double *e2e, double *dev_side)
{
	double wall[16], device[16];
	int r;

	for (r = 0; r < reps; r++) {
		uint64_t b0 = param(dev, DRM_TPU_PARAM_DMA_BYTES);
		uint64_t t0 = param(dev, DRM_TPU_PARAM_DMA_BUSY_NS);
		double start = now_s();
		int ret = to_device ? tpurt_buffer_write(buf, 0, host, size) :
				      tpurt_buffer_read(buf, 0, host, size);

		wall[r] = now_s() - start;
		if (ret) {
			fprintf(stderr, "bench_dma: %s\n", tpurt_last_error());
			return -1;
		}
		device[r] = (param(dev, DRM_TPU_PARAM_DMA_BUSY_NS) - t0) * 1e-9;
		if (param(dev, DRM_TPU_PARAM_DMA_BYTES) - b0 != size) {
			fprintf(stderr, "bench_dma: device counted a different size\n");
			return -1;
		}
		wall[r] = size / wall[r] / 1e9;
		device[r] = size / device[r] / 1e9;
	}
	qsort(wall, reps, sizeof(double), cmp_double);
	qsort(device, reps, sizeof(double), cmp_double);
	*e2e = wall[reps / 2];
	*dev_side = device[reps / 2];
	return 0;
}

int main(void)
{
	static const uint64_t sizes[] = { 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB,
					  256 * MiB };
	struct tpurt_buffer *buf;
	struct tpurt_device *dev;
	uint8_t *host;
	unsigned int i;
	int dir;

	if (tpurt_open(&dev) || tpurt_buffer_create(dev, MAX_SIZE, &buf)) {
		fprintf(stderr, "bench_dma: %s\n", tpurt_last_error());
		return 1;
	}
	host = aligned_alloc(4096, MAX_SIZE);
	if (!host)
		return 1;
	memset(host, 0x5a, MAX_SIZE);	/* fault the pages in first */

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (dir = 1; dir >= 0; dir--) {
			const char *name = dir ? "h2d" : "d2h";
			int reps = sizes[i] >= 64 * MiB ? 3 : 9;
			double e2e, device;

			if (measure(dev, buf, host, sizes[i], dir, reps, &e2e, &device))
				return 1;
			printf("bench: dma_%s_e2e_%lluMiB = %.2f GB/s\n", name,
			       (unsigned long long)(sizes[i] / MiB), e2e);
			printf("bench: dma_%s_device_%lluMiB = %.2f GB/s\n", name,
			       (unsigned long long)(sizes[i] / MiB), device);
		}
	}
	tpurt_buffer_free(buf);
	tpurt_close(dev);
	return 0;
}
