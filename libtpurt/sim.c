// SPDX-License-Identifier: MIT
/*
 * The in-process device: the device's engine (qemu-device/engine) linked
 * into the program, HBM in anonymous host memory, buffers from a first-fit
 * allocator, copies by memcpy, jobs run to completion on submit. DESIGN
 * section 1 allows libtpurt exactly this one use of another layer. Built
 * into libtpurt-sim.a and libtpurt-sim.so.0 only, so the shared
 * libtpurt.so.0 (which the guest loads) does not pull in the engine and
 * OpenBLAS; it loads libtpurt-sim.so.0 when asked (sim_backend.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tpu_compute.h"
#include "tpu_copy.h"
#include "tpu_engine.h"
#include "sim_backend.h"
#include "tpurt_private.h"

#define SIM_ALIGN	4096ull

struct sim_range {
	uint64_t offset, size;
};

struct sim {
	struct tpu_config cfg;
	struct tpu_engine *engine;
	uint8_t *hbm;
	struct sim_range *ranges;	/* allocated, sorted by offset */
	unsigned int nranges, cap;
	uint32_t next_handle;
};

static struct sim *sim_of(struct tpurt_device *dev)
{
	return dev->sim;
}

static void sim_close(struct tpurt_device *dev)
{
	struct sim *s = sim_of(dev);

	tpu_engine_destroy(s->engine);
	munmap(s->hbm, s->cfg.hbm_size);
	free(s->ranges);
	free(s);
}

static int sim_info(struct tpurt_device *dev, struct tpurt_device_info *info)
{
	const struct tpu_config *c = &sim_of(dev)->cfg;

	memset(info, 0, sizeof(*info));
	snprintf(info->node, sizeof(info->node), "%s", dev->node);
	snprintf(info->driver, sizeof(info->driver), "tpu-sim");
	info->hw_version = 1 << 16;
#define INFO_FROM_CONFIG(id, field, ...) info->field = c->field;
	TPU_PARAMS(INFO_FROM_CONFIG)
#undef INFO_FROM_CONFIG
	return 0;
}

/* First fit: the lowest gap of @size between allocated ranges. */
static int sim_alloc(struct sim *s, uint64_t size, uint64_t *offset)
{
	uint64_t at = 0;
	unsigned int i;

	for (i = 0; i < s->nranges; i++) {
		if (s->ranges[i].offset - at >= size)
			break;
		at = s->ranges[i].offset + s->ranges[i].size;
	}
	if (i == s->nranges && s->cfg.hbm_size - at < size)
		return -ENOSPC;
	if (s->nranges == s->cap) {
		unsigned int cap = s->cap ? 2 * s->cap : 64;
		struct sim_range *r = realloc(s->ranges, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		s->ranges = r;
		s->cap = cap;
	}
	memmove(&s->ranges[i + 1], &s->ranges[i],
		(s->nranges - i) * sizeof(*s->ranges));
	s->ranges[i] = (struct sim_range){ at, size };
	s->nranges++;
	*offset = at;
	return 0;
}

/* The sim's HBM is private anonymous memory: discarded pages read as zeros. */
static int sim_hbm_discard(void *opaque, uint64_t hbm_offset, uint64_t len)
{
	struct sim *s = opaque;

	return madvise(s->hbm + hbm_offset, len, MADV_DONTNEED);
}

/* Clear a new buffer as the device does: a zero fill on its DMA path. */
static void sim_zero(struct sim *s, uint64_t offset, uint64_t size)
{
	const struct tpu_dma_desc d = {
		.op = TPU_DMA_OP_FILL, .hbm_offset = offset, .length = size,
	};
	const struct tpu_hbm_discard discard = { sim_hbm_discard, s };
	struct tpu_desc_result res;

	tpu_copy_run(&d, s->hbm, s->cfg.hbm_size, NULL, &discard, NULL, &res);
	if (res.status)
		memset(s->hbm + offset, 0, size);
}

static int sim_buffer_create(struct tpurt_buffer *buf)
{
	struct sim *s = sim_of(buf->dev);
	uint64_t size = (buf->size + SIM_ALIGN - 1) & ~(SIM_ALIGN - 1);
	int ret = sim_alloc(s, size, &buf->hbm_offset);

	if (ret == -ENOSPC)
		return tpurt_fail(ret, "no free HBM range of %llu bytes",
				  (unsigned long long)buf->size);
	if (ret)
		return tpurt_fail(ret, "out of memory");
	buf->alloc_size = size;
	buf->handle = ++s->next_handle;
	sim_zero(s, buf->hbm_offset, size);
	return 0;
}

static void sim_buffer_free(struct tpurt_buffer *buf)
{
	struct sim *s = sim_of(buf->dev);

	for (unsigned int i = 0; i < s->nranges; i++) {
		if (s->ranges[i].offset != buf->hbm_offset)
			continue;
		memmove(&s->ranges[i], &s->ranges[i + 1],
			(s->nranges - i - 1) * sizeof(*s->ranges));
		s->nranges--;
		return;
	}
}

static void *sim_buffer_map(struct tpurt_buffer *buf)
{
	return sim_of(buf->dev)->hbm + buf->hbm_offset;
}

static int sim_buffer_write(struct tpurt_buffer *buf, uint64_t offset,
			    const void *src, uint64_t len)
{
	memcpy((uint8_t *)sim_buffer_map(buf) + offset, src, len);
	return 0;
}

static int sim_buffer_read(struct tpurt_buffer *buf, uint64_t offset,
			   void *dst, uint64_t len)
{
	memcpy(dst, (uint8_t *)sim_buffer_map(buf) + offset, len);
	return 0;
}

static int sim_buffer_copy(struct tpurt_buffer *dst, uint64_t dst_offset,
			   struct tpurt_buffer *src, uint64_t src_offset,
			   uint64_t len)
{
	memmove((uint8_t *)sim_buffer_map(dst) + dst_offset,
		(uint8_t *)sim_buffer_map(src) + src_offset, len);
	return 0;
}

static int sim_job_submit(struct tpurt_job *job, const void *desc, size_t len,
			  struct tpurt_buffer *const *bufs, unsigned int nbufs)
{
	struct sim *s = sim_of(job->dev);
	struct tpu_buffer_slot slots[TPU_JOB_MAX_SLOTS];
	struct tpu_job_result *res = calloc(1, sizeof(*res));

	if (!res)
		return tpurt_fail(-ENOMEM, "out of memory");
	for (unsigned int i = 0; i < nbufs; i++)
		slots[i] = (struct tpu_buffer_slot){ bufs[i]->hbm_offset,
						     bufs[i]->size };
	tpu_engine_run(s->engine, desc, len, s->hbm, s->cfg.hbm_size, slots,
		       nbufs, 0, res);
	/* As the render node reports it: the device makes the same report. */
	tpu_job_report_fill(res, &job->report);
	job->status = res->error.code ? -EIO : 0;
	job->id = ++s->next_handle;
	free(res);
	return 0;
}

static int sim_job_wait(struct tpurt_job *job)
{
	return 0;	/* it ran in submit */
}

/* Queues need the render node's io_uring or syncobjs; jobs here run at once. */
static int sim_no_queues(struct tpurt_device *dev)
{
	return tpurt_fail(-EOPNOTSUPP,
			  "%s: the in-process device has no queues or syncobjs (they are the render node's io_uring and ioctls); it runs each job as it is submitted: use tpurt_buffer_*, tpurt_job_* or tpurt_pallas_call",
			  dev->node);
}

static int sim_submit_path(struct tpurt_device *dev,
			   enum tpurt_submit_path want,
			   enum tpurt_submit_path *path)
{
	return sim_no_queues(dev);
}

static int sim_sync_create(struct tpurt_device *dev, uint32_t *syncp)
{
	return sim_no_queues(dev);
}

static void sim_sync_destroy(struct tpurt_device *dev, uint32_t sync)
{
}

static const struct tpurt_backend sim_backend = {
	.close = sim_close,
	.info = sim_info,
	.buffer_create = sim_buffer_create,
	.buffer_free = sim_buffer_free,
	.buffer_write = sim_buffer_write,
	.buffer_read = sim_buffer_read,
	.buffer_copy = sim_buffer_copy,
	.buffer_map = sim_buffer_map,
	.job_submit = sim_job_submit,
	.job_wait = sim_job_wait,
	.submit_path = sim_submit_path,
	.sync_create = sim_sync_create,
	.sync_destroy = sim_sync_destroy,
};

int tpurt_sim_create(const struct tpu_config *cfg, struct tpurt_device **devp)
{
	struct tpurt_device *dev = NULL;
	struct sim *s;
	char err[256];
	int ret;

	*devp = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return tpurt_fail(-ENOMEM, "out of memory");
	s->cfg = *cfg;
	s->engine = tpu_engine_create(&s->cfg, err, sizeof(err));
	if (!s->engine) {
		ret = tpurt_fail(-EINVAL, "sim device: %s", err);
		goto err_free;
	}
	/* Untouched pages cost nothing: a 1 GiB HBM is cheap until used. */
	s->hbm = mmap(NULL, s->cfg.hbm_size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s->hbm == MAP_FAILED) {
		ret = tpurt_fail(-ENOMEM, "sim device: cannot map %llu bytes of HBM",
				 (unsigned long long)s->cfg.hbm_size);
		goto err_engine;
	}
	dev = calloc(1, sizeof(*dev));
	if (!dev) {
		ret = tpurt_fail(-ENOMEM, "out of memory");
		goto err_unmap;
	}
	dev->ops = &sim_backend;
	dev->fd = -1;
	snprintf(dev->node, sizeof(dev->node), "sim");
	dev->sim = s;
	*devp = dev;
	return 0;

err_unmap:
	munmap(s->hbm, s->cfg.hbm_size);
err_engine:
	tpu_engine_destroy(s->engine);
err_free:
	free(s);
	return ret;
}
