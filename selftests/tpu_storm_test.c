// SPDX-License-Identifier: MIT
/*
 * A storm: STORM_PROCS processes, each with two threads on the same two
 * files of the device, issue random ioctls (every DRM_IOCTL_TPU_* number,
 * with right and wrong sizes and directions, invalid numbers of the
 * driver's range, and the DRM core's GEM, PRIME and syncobj ioctls that
 * make handles come and go) and random io_uring commands, with random
 * contents: real and random handles, valid jobs, mutated ones and random
 * descriptors, pointers into guarded scratch memory, into buffer mappings
 * and bad pointers; they also map buffers and reopen files with work in
 * flight, and their waits are interrupted by signals. Meanwhile a
 * neighbour (the test itself) keeps a buffer with a known checksum and
 * re-reads it. Afterwards the neighbour's data is intact, a normal job and
 * copy work, everything the storm held is freed, and the kernel logged no
 * warning, BUG or oops.
 *
 * TPU_STORM_SEED=N reproduces each thread's sequence of calls (the seed is
 * printed; timing and interleaving still vary); TPU_STORM_SECONDS=N sets
 * the storm's length (default 10, at most 100).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xf86drm.h>

#include "tpu_drm.h"
#include "tpu_job.h"
#include "tpurt.h"
#include "tpu_blocker.h"
#include "tpu_kernel_health.h"
#include "kselftest_harness.h"
#include "tpu_require_device.h"

#define STORM_PROCS		3
#define STORM_SECONDS		10
#define STORM_MAX_SECONDS	100
/* After the storm: stragglers are killed, then freeing may lag this long. */
#define STORM_GRACE_SECONDS	15
#define STORM_SETTLE_SECONDS	30

#define MAX_BOS		32
#define MAX_SYNCS	16
#define MAX_JOBS	64
#define MAX_MAPS	8
#define BO_MAX_BYTES	(1u << 20)	/* random buffers stay small */
#define JOB_MAX_MS	100		/* and random jobs short */

/* Scratch memory between two PROT_NONE pages: a copy past it faults. */
#define SCRATCH		(2u << 20)
#define DESC_AREA	0		/* descriptors: up to 1 MiB + a bit */
#define TABLE_AREA	(SCRATCH - 8192)	/* handle and syncobj arrays */

#define NEIGHBOUR_BYTES	(4u << 20)

struct storm_stats {
	uint64_t ioctls, ioctls_ok, urings, cqes, cqes_ok;
	uint64_t jobs, copies, bos, maps, reopens;
};

struct storm_file {
	int fd;
	uint32_t bo[MAX_BOS];
	uint64_t bo_size[MAX_BOS];
	unsigned int nbo;
	uint32_t sync[MAX_SYNCS];
	unsigned int nsync;
	uint64_t job[MAX_JOBS];
	unsigned int njob;
};

struct storm {
	uint64_t rng;
	char path[64];
	struct storm_file f[2];
	uint8_t *scratch;
	struct io_uring ring[2];	/* SQE128 (CQE32 or not); a plain one */
	void *map[MAX_MAPS];
	size_t map_len[MAX_MAPS];
	struct storm_stats *st;
	double end;
	int may_reopen, failed;
};

/* --- random values --- */

static uint64_t rnd(struct storm *s)
{
	/* xorshift64* */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 2685821657736338717ull;
}

static uint64_t below(struct storm *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

static int chance(struct storm *s, unsigned int percent)
{
	return below(s, 100) < percent;
}

static const uint64_t edges[] = {
	1, 2, 3, 7, 8, 15, 16, 63, 64, 4095, 4096, 4097, 65536,
	TPU_JOB_MAX_SIZE - 1, TPU_JOB_MAX_SIZE, TPU_JOB_MAX_SIZE + 1,
	INT32_MAX, UINT32_MAX, 1ull << 32, 1ull << 40, INT64_MAX,
	UINT64_MAX - 4095, UINT64_MAX,
};

static uint64_t any_u64(struct storm *s)
{
	switch (below(s, 4)) {
	case 0: return 0;
	case 1: return edges[below(s, sizeof(edges) / sizeof(edges[0]))];
	case 2: return below(s, 256);
	default: return rnd(s);
	}
}

static struct storm_file *other(struct storm *s, struct storm_file *f)
{
	return f == &s->f[0] ? &s->f[1] : &s->f[0];
}

/* Mostly a live handle of @f, sometimes the other file's, 0 or junk. */
static uint32_t any_handle(struct storm *s, struct storm_file *f)
{
	struct storm_file *o = other(s, f);

	switch (below(s, 10)) {
	case 0: return 0;
	case 1: return (uint32_t)any_u64(s);
	case 2: return o->nbo ? o->bo[below(s, o->nbo)] : 1;
	case 3: return 1 + below(s, 64);
	default: return f->nbo ? f->bo[below(s, f->nbo)] : 1;
	}
}

static uint32_t any_sync(struct storm *s, struct storm_file *f)
{
	if (chance(s, 60) && f->nsync)
		return f->sync[below(s, f->nsync)];
	return chance(s, 50) ? 0 : (uint32_t)any_u64(s);
}

/* Bytes for a length or an offset: mostly small, sometimes anything. */
static uint64_t any_len(struct storm *s)
{
	switch (below(s, 10)) {
	case 0: return 0;
	case 1: case 2: return any_u64(s);
	case 3: return 1 + below(s, BO_MAX_BYTES);
	default: return 1 + below(s, 4096);
	}
}

/*
 * Mostly into scratch (some runs past its end into the guard), a buffer's
 * mapping (I/O memory, which copies cannot pin), or bad.
 */
static uint64_t any_ptr(struct storm *s)
{
	unsigned int m = below(s, MAX_MAPS);

	if (s->map[m] && chance(s, 10))
		return (uintptr_t)s->map[m] + below(s, s->map_len[m]);
	switch (below(s, 10)) {
	case 0: return 0;
	case 1: return 0xffff888000000000ull + below(s, 1u << 20);
	case 2: return any_u64(s);
	case 3: return (uintptr_t)s->scratch + SCRATCH - below(s, 64);
	default: return (uintptr_t)s->scratch + below(s, SCRATCH);
	}
}

static uint32_t any_timeout(struct storm *s)
{
	uint32_t t = chance(s, 10) ? (uint32_t)any_u64(s) : 0;

	/* Accepted limits stay short: a storm's job never holds the queue long. */
	return t > 120000 ? t : 1 + below(s, JOB_MAX_MS);
}

static void fill_random(struct storm *s, void *p, size_t n)
{
	uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)rnd(s);
}

/* --- arguments, shared by ioctls and uring_cmds --- */

/*
 * A descriptor in scratch: a valid job (@clean: one that fits any two
 * buffers, unchanged), mutated or padded, or junk.
 */
static uint32_t make_desc(struct storm *s, int clean)
{
	uint8_t *desc = s->scratch + DESC_AREA;
	static const uint32_t lens[] = { 16, 256, 1024, 4096 };
	struct tpu_add_job j;
	uint32_t size = sizeof(j);
	int k;

	if (clean) {
		tpu_add_job_init(&j, 16 << below(s, 5), 0, 1.0f, 0);
		memcpy(desc, &j, sizeof(j));
		return size;
	}
	if (chance(s, 25)) {
		size = chance(s, 80) ? 1 + below(s, 4096) : 1 + below(s, TPU_JOB_MAX_SIZE + 64);
		fill_random(s, desc, size < 4096 ? size : 4096);
		if (chance(s, 50))
			memcpy(desc, &(uint32_t){ TPU_JOB_MAGIC }, 4);
		return size;
	}
	tpu_add_job_init(&j, lens[below(s, 4)], below(s, 4) * 64,
			 (float)below(s, 100), chance(s, 90) ? 0 : (int32_t)below(s, 4));
	if (chance(s, 10))
		j.h.grid[0] = 1 + below(s, 1024);
	if (chance(s, 10))
		j.h.flags = TPU_JOB_F_DEBUG;
	/* Mutations: bytes anywhere, or a field set to an edge value. */
	for (k = below(s, 4); k > 0; k--) {
		if (chance(s, 50)) {
			((uint8_t *)&j)[below(s, sizeof(j))] = (uint8_t)rnd(s);
		} else {
			uint32_t v = (uint32_t)any_u64(s);

			memcpy((uint8_t *)&j + below(s, sizeof(j) / 4) * 4, &v, 4);
		}
	}
	if (chance(s, 5)) {
		size = sizeof(j) + below(s, TPU_JOB_MAX_SIZE - sizeof(j));
		tpu_add_job_pad(desc, size, &j);
	} else {
		memcpy(desc, &j, sizeof(j));
	}
	return size;
}

/* A u32 array in scratch: @n handles or syncobjs of @f. */
static uint64_t make_table(struct storm *s, struct storm_file *f,
			   uint32_t n, int syncs, unsigned int at)
{
	uint32_t *t = (uint32_t *)(s->scratch + TABLE_AREA + at);

	for (uint32_t i = 0; i < n && i < 512; i++)
		t[i] = syncs ? any_sync(s, f) : any_handle(s, f);
	return chance(s, 90) ? (uintptr_t)t : any_ptr(s);
}

static void make_submit(struct storm *s, struct storm_file *f,
			struct drm_tpu_submit *a)
{
	int clean = f->nbo && chance(s, 30);
	uint32_t size = make_desc(s, clean);

	memset(a, 0, sizeof(*a));
	if (clean) {
		/* A job that runs: its buffers, no syncobj in, a short limit. */
		uint32_t *t = (uint32_t *)(s->scratch + TABLE_AREA);

		t[0] = f->bo[below(s, f->nbo)];
		t[1] = f->bo[below(s, f->nbo)];
		*a = (struct drm_tpu_submit){
			.desc_ptr = (uintptr_t)(s->scratch + DESC_AREA),
			.desc_size = size, .handles_ptr = (uintptr_t)t,
			.handle_count = 2,
			.flags = chance(s, 50) ? DRM_TPU_SUBMIT_NO_RECORD : 0,
			.out_syncobj = chance(s, 50) ? 0 : any_sync(s, f),
			.timeout_ms = 1 + below(s, JOB_MAX_MS),
		};
		return;
	}
	a->desc_ptr = chance(s, 95) ? (uintptr_t)(s->scratch + DESC_AREA) : any_ptr(s);
	a->desc_size = chance(s, 85) ? size : (uint32_t)any_len(s);
	a->flags = chance(s, 45) ? 0 : chance(s, 90) ? DRM_TPU_SUBMIT_NO_RECORD :
		   (uint32_t)any_u64(s);
	a->handle_count = chance(s, 75) ? 2 : chance(s, 80) ? below(s, 5) :
			  (uint32_t)any_u64(s);
	a->handles_ptr = make_table(s, f, a->handle_count, 0, 0);
	a->in_syncobj_count = chance(s, 70) ? 0 : chance(s, 80) ? 1 + below(s, 2) :
			      (uint32_t)any_u64(s);
	a->in_syncobjs_ptr = make_table(s, f, a->in_syncobj_count, 1, 4096);
	a->out_syncobj = chance(s, 70) ? 0 : any_sync(s, f);
	a->timeout_ms = any_timeout(s);
	if (chance(s, 3))
		a->job_id = any_u64(s);
}

static void make_copy(struct storm *s, struct storm_file *f,
		      struct drm_tpu_copy *a, int wait_allowed)
{
	memset(a, 0, sizeof(*a));
	a->op = chance(s, 90) ? 1 + below(s, 3) : (uint32_t)any_u64(s);
	a->flags = wait_allowed && chance(s, 30) ? DRM_TPU_COPY_WAIT :
		   chance(s, 95) ? 0 : (uint32_t)any_u64(s);
	a->handle = any_handle(s, f);
	a->offset = chance(s, 70) ? below(s, 65536) : any_len(s);
	a->length = chance(s, 70) ? 1 + below(s, 65536) : any_len(s);
	if (a->op == DRM_TPU_COPY_BO_TO_BO || chance(s, 5)) {
		a->src_handle = any_handle(s, f);
		a->src_offset = chance(s, 70) ? below(s, 65536) : any_len(s);
	}
	if (a->op != DRM_TPU_COPY_BO_TO_BO || chance(s, 5))
		a->user_ptr = any_ptr(s);
	a->in_syncobj = chance(s, 70) ? 0 : any_sync(s, f);
	a->out_syncobj = chance(s, 70) ? 0 : any_sync(s, f);
}

/* --- one random call --- */

static int raw_ioctl(struct storm *s, int fd, unsigned long req, void *arg)
{
	int ret = ioctl(fd, req, arg) ? -errno : 0;

	s->st->ioctls++;
	s->st->ioctls_ok += !ret;
	return ret;
}

static void remember(uint32_t *list, unsigned int *n, unsigned int max,
		     uint32_t v)
{
	if (*n < max)
		list[(*n)++] = v;
	else
		list[v % max] = v;
}

static void forget(uint32_t *list, unsigned int *n, uint32_t v)
{
	for (unsigned int i = 0; i < *n; i++) {
		if (list[i] == v) {
			list[i] = list[--*n];
			return;
		}
	}
}

static void storm_bo_create(struct storm *s, struct storm_file *f)
{
	struct drm_tpu_bo_create a = {
		.size = chance(s, 85) ? 1 + below(s, BO_MAX_BYTES) : any_u64(s),
		.flags = chance(s, 95) ? 0 : (uint32_t)any_u64(s),
	};

	/* Never a buffer that large by chance: it would only be slow to clear. */
	if (a.size > BO_MAX_BYTES && a.size <= (64ull << 30))
		a.size = BO_MAX_BYTES;
	if (f->nbo == MAX_BOS) {
		struct drm_gem_close c = { .handle = f->bo[0] };

		raw_ioctl(s, f->fd, DRM_IOCTL_GEM_CLOSE, &c);
		f->bo[0] = f->bo[--f->nbo];
		f->bo_size[0] = f->bo_size[f->nbo];
	}
	if (!raw_ioctl(s, f->fd, DRM_IOCTL_TPU_BO_CREATE, &a)) {
		f->bo_size[f->nbo] = a.size;
		f->bo[f->nbo++] = a.handle;
		s->st->bos++;
	}
}

static void storm_submit(struct storm *s, struct storm_file *f)
{
	struct drm_tpu_submit a;

	make_submit(s, f, &a);
	if (!raw_ioctl(s, f->fd, DRM_IOCTL_TPU_SUBMIT, &a)) {
		s->st->jobs++;
		if (a.job_id && f->njob < MAX_JOBS)
			f->job[f->njob++] = a.job_id;
		else if (a.job_id)
			f->job[below(s, MAX_JOBS)] = a.job_id;
	}
}

static void storm_job_info(struct storm *s, struct storm_file *f)
{
	struct tpu_job_report rep;
	struct drm_tpu_job_info a = {
		.job_id = f->njob && chance(s, 80) ? f->job[below(s, f->njob)] : any_u64(s),
		.report_ptr = chance(s, 50) ? (uintptr_t)&rep : chance(s, 50) ? 0 : any_ptr(s),
		.report_size = chance(s, 80) ? sizeof(rep) : (uint32_t)any_u64(s),
		.flags = chance(s, 90) ? below(s, 4) : (uint32_t)any_u64(s),
		.pad = chance(s, 95) ? 0 : 1,
	};

	raw_ioctl(s, f->fd, DRM_IOCTL_TPU_JOB_INFO, &a);
}

/* A TPU ioctl number with a wrong size or direction, or one past the list. */
static unsigned long odd_request(struct storm *s)
{
	unsigned int nr = DRM_COMMAND_BASE + (chance(s, 50) ? below(s, 6) :
					      6 + below(s, 0x60 - 6));

	return _IOC(below(s, 4), DRM_IOCTL_BASE, nr, below(s, 512));
}

static void storm_mmap(struct storm *s, struct storm_file *f)
{
	struct drm_tpu_bo_info info = { .handle = any_handle(s, f) };
	unsigned int slot = below(s, MAX_MAPS);
	void *p;

	if (s->map[slot]) {
		munmap(s->map[slot], s->map_len[slot]);
		s->map[slot] = NULL;
	}
	if (raw_ioctl(s, f->fd, DRM_IOCTL_TPU_BO_INFO, &info))
		return;
	if (chance(s, 10))
		info.mmap_offset += 4096 * below(s, 4);
	if (chance(s, 10))
		info.size += 4096;
	p = mmap(NULL, info.size, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd,
		 info.mmap_offset);
	if (p == MAP_FAILED)
		return;
	s->st->maps++;
	/* Its own buffer: write and read some of it through the mapping. */
	for (int i = 0; i < 8 && info.size; i++)
		((volatile uint8_t *)p)[below(s, info.size)] ^= (uint8_t)rnd(s);
	s->map[slot] = p;
	s->map_len[slot] = info.size;
}

/* Close one file with its work in flight and open it again. */
static void storm_reopen(struct storm *s, struct storm_file *f)
{
	close(f->fd);
	memset(f, 0, sizeof(*f));
	f->fd = open(s->path, O_RDWR | O_CLOEXEC);
	s->st->reopens++;
}

static void storm_syncobj(struct storm *s, struct storm_file *f)
{
	switch (below(s, 4)) {
	case 0: {
		struct drm_syncobj_create a = {
			.flags = chance(s, 50) ? DRM_SYNCOBJ_CREATE_SIGNALED :
				 chance(s, 90) ? 0 : (uint32_t)any_u64(s),
		};

		if (!raw_ioctl(s, f->fd, DRM_IOCTL_SYNCOBJ_CREATE, &a))
			remember(f->sync, &f->nsync, MAX_SYNCS, a.handle);
		break;
	}
	case 1: {
		struct drm_syncobj_destroy a = { .handle = any_sync(s, f) };

		if (!raw_ioctl(s, f->fd, DRM_IOCTL_SYNCOBJ_DESTROY, &a))
			forget(f->sync, &f->nsync, a.handle);
		break;
	}
	case 2: {
		uint32_t h[2] = { any_sync(s, f), any_sync(s, f) };
		struct drm_syncobj_wait a = {
			.handles = (uintptr_t)h, .count_handles = 1 + below(s, 2),
			/* absolute: at most 20 ms from now */
			.timeout_nsec = (int64_t)(tpu_now() * 1e9) + below(s, 20000000),
			.flags = below(s, 4),
		};

		raw_ioctl(s, f->fd, DRM_IOCTL_SYNCOBJ_WAIT, &a);
		break;
	}
	default: {
		/* A buffer of this file shared to the other through PRIME. */
		struct drm_prime_handle a = {
			.handle = any_handle(s, f), .flags = DRM_CLOEXEC,
		};
		struct storm_file *o = other(s, f);

		if (raw_ioctl(s, f->fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &a))
			break;
		a.flags = 0;
		if (!raw_ioctl(s, o->fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &a) &&
		    o->nbo < MAX_BOS)
			o->bo[o->nbo++] = a.handle;
		close(a.fd);
		break;
	}
	}
}

static void storm_ioctl(struct storm *s, struct storm_file *f)
{
	union {
		struct drm_tpu_get_param param;
		struct drm_tpu_bo_info info;
		struct drm_tpu_copy copy;
		struct drm_gem_close close;
		uint8_t bytes[512];
	} a;

	switch (below(s, 16)) {
	case 0: case 1:
		storm_bo_create(s, f);
		break;
	case 2:
		memset(&a, 0, sizeof(a));
		a.param.param = chance(s, 80) ? below(s, DRM_TPU_PARAM_COUNT + 4) :
				(uint32_t)any_u64(s);
		a.param.pad = chance(s, 95) ? 0 : 1;
		raw_ioctl(s, f->fd, DRM_IOCTL_TPU_GET_PARAM, &a.param);
		break;
	case 3:
		memset(&a, 0, sizeof(a));
		a.info.handle = any_handle(s, f);
		a.info.pad = chance(s, 95) ? 0 : 1;
		raw_ioctl(s, f->fd, DRM_IOCTL_TPU_BO_INFO, &a.info);
		break;
	case 4: case 5: case 6:
		make_copy(s, f, &a.copy, 1);
		if (!raw_ioctl(s, f->fd, DRM_IOCTL_TPU_COPY, &a.copy))
			s->st->copies++;
		break;
	case 7: case 8: case 9:
		storm_submit(s, f);
		break;
	case 10:
		storm_job_info(s, f);
		break;
	case 11:
		/* Random bytes, as any request of the driver's range. */
		fill_random(s, a.bytes, sizeof(a.bytes));
		raw_ioctl(s, f->fd, odd_request(s), chance(s, 90) ? a.bytes :
			  (void *)(uintptr_t)any_ptr(s));
		break;
	case 12:
		a.close.handle = any_handle(s, f);
		a.close.pad = chance(s, 95) ? 0 : 1;
		if (!raw_ioctl(s, f->fd, DRM_IOCTL_GEM_CLOSE, &a.close)) {
			for (unsigned int i = 0; i < f->nbo; i++) {
				if (f->bo[i] == a.close.handle) {
					f->bo[i] = f->bo[--f->nbo];
					f->bo_size[i] = f->bo_size[f->nbo];
					break;
				}
			}
		}
		break;
	case 13:
		storm_syncobj(s, f);
		break;
	case 14:
		storm_mmap(s, f);
		break;
	default:
		if (s->may_reopen && chance(s, 2))
			storm_reopen(s, f);
		else
			storm_syncobj(s, f);
		break;
	}
}

/*
 * A batch of random uring_cmds, then whatever CQEs have arrived; now and
 * then on the ring without SQE128, which the driver refuses.
 */
static void storm_uring(struct storm *s, struct storm_file *f)
{
	struct io_uring *ring = &s->ring[chance(s, 5)];
	int sqe128 = ring->flags & IORING_SETUP_SQE128;
	struct io_uring_cqe *cqe;
	int n = 1 + below(s, 8), queued = 0;

	for (int i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		union {
			struct drm_tpu_submit submit;
			struct drm_tpu_copy copy;
			uint8_t bytes[DRM_TPU_URING_CMD_PAYLOAD];
		} a;
		uint64_t pick = below(s, 20);

		if (!sqe)
			break;
		memset(&a, 0, sizeof(a));
		if (pick < 9)
			make_submit(s, f, &a.submit);
		else if (pick < 18)
			make_copy(s, f, &a.copy, chance(s, 5));
		else
			fill_random(s, &a, sizeof(a));
		if (chance(s, 5))
			a.bytes[sizeof(a) - 1 - below(s, 8)] = 1 + below(s, 255);
		memset(sqe, 0, sqe128 ? 128 : 64);
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = chance(s, 95) ? f->fd : other(s, f)->fd;
		sqe->cmd_op = pick < 9 ? DRM_TPU_URING_CMD_SUBMIT :
			      pick < 18 ? DRM_TPU_URING_CMD_COPY : (uint32_t)any_u64(s);
		if (chance(s, 5))
			sqe->flags |= IOSQE_ASYNC;
		if (sqe128)
			memcpy(sqe->cmd, &a, sizeof(a));
		queued++;
	}
	if (queued && io_uring_submit(ring) > 0)
		s->st->urings += queued;
	while (io_uring_peek_cqe(ring, &cqe) == 0) {
		s->st->cqes++;
		s->st->cqes_ok += cqe->res == 0;
		io_uring_cqe_seen(ring, cqe);
	}
}

/*
 * One thread's storm on the files in @arg (its own handles, scratch and
 * rings) until its end; only the first thread of a process reopens files,
 * under the other one's feet.
 */
static void *storm_thread(void *arg)
{
	struct io_uring_params p = { 0 }, plain = { 0 };
	struct storm *s = arg;
	uint8_t *mem;

	mem = mmap(NULL, SCRATCH + 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	s->scratch = mem + 4096;
	p.flags = IORING_SETUP_SQE128 | (chance(s, 50) ? IORING_SETUP_CQE32 : 0);
	if (mem == MAP_FAILED ||
	    mprotect(s->scratch, SCRATCH, PROT_READ | PROT_WRITE) ||
	    io_uring_queue_init_params(64, &s->ring[0], &p) ||
	    io_uring_queue_init_params(8, &s->ring[1], &plain)) {
		s->failed = 1;
		return NULL;
	}
	while (tpu_now() < s->end) {
		struct storm_file *f = &s->f[below(s, 2)];

		if (f->fd < 0)
			f->fd = open(s->path, O_RDWR | O_CLOEXEC);
		if (chance(s, 80))
			storm_ioctl(s, f);
		else
			storm_uring(s, f);
	}
	/* Leave with work in flight: closing must cope. */
	io_uring_queue_exit(&s->ring[0]);
	io_uring_queue_exit(&s->ring[1]);
	return NULL;
}

static void storm_signal(int sig)
{
}

/*
 * One storm process: two threads on the same two files until @end, so
 * calls on one file also race each other. Each thread's sequence of calls
 * follows from @seed; their interleaving does not.
 */
static void storm_run(const char *path, uint64_t seed, double end,
		      struct storm_stats st[2])
{
	static struct storm s[2];
	pthread_t other_thread;

	for (int t = 0; t < 2; t++) {
		s[t] = (struct storm){
			.rng = (seed + t * 0x9e3779b97f4a7c15ull) | 1,
			.st = &st[t], .end = end, .may_reopen = !t,
		};
		snprintf(s[t].path, sizeof(s[t].path), "%s", path);
	}
	/* Signals end waits (-EINTR) rather than restart them. */
	sigaction(SIGUSR1, &(struct sigaction){ .sa_handler = storm_signal }, NULL);
	for (int i = 0; i < 2; i++) {
		s[0].f[i].fd = s[1].f[i].fd = open(path, O_RDWR | O_CLOEXEC);
		if (s[0].f[i].fd < 0)
			_exit(2);
	}
	if (pthread_create(&other_thread, NULL, storm_thread, &s[1]))
		_exit(2);
	storm_thread(&s[0]);
	pthread_join(other_thread, NULL);
	_exit(s[0].failed || s[1].failed ? 3 : 0);
}

/* --- the neighbour --- */

static uint64_t checksum(const uint8_t *p, size_t n)
{
	uint64_t sum = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		sum = (sum ^ p[i]) * 1099511628211ull;
	return sum;
}

struct neighbour {
	int fd;
	uint32_t bo;
	uint8_t *map;		/* the buffer, mapped */
	uint8_t *read;		/* a copy read back */
	uint64_t sum;
};

/* The buffer read by DMA and through the mapping still has its checksum. */
static int neighbour_intact(struct neighbour *n)
{
	if (tpu_copy_wait(n->fd, DRM_TPU_COPY_FROM_BO, n->bo, 0, n->read,
			  NEIGHBOUR_BYTES))
		return 0;
	return checksum(n->read, NEIGHBOUR_BYTES) == n->sum &&
	       checksum(n->map, NEIGHBOUR_BYTES) == n->sum;
}

/* An add job on fresh buffers of @fd, waited for: 0 when its output is right. */
static int normal_job(int fd)
{
	float src[16], got[16];
	uint32_t h[2];
	uint64_t id;
	struct tpu_add_job j;
	int bad = 0, ret;

	for (int i = 0; i < 16; i++)
		src[i] = (float)i * 3.0f;
	if (tpu_bo_create(fd, 64, &h[0]) || tpu_bo_create(fd, 64, &h[1]) ||
	    tpu_copy_wait(fd, DRM_TPU_COPY_TO_BO, h[0], 0, src, 64))
		return -1;
	tpu_add_job_init(&j, 16, 0, 0.5f, 0);
	ret = tpu_submit(fd, &j, sizeof(j), h, 2, 0, 0, 0, &id);
	if (!ret)
		ret = tpu_job_status(fd, id, 1);
	if (!ret)
		ret = tpu_copy_wait(fd, DRM_TPU_COPY_FROM_BO, h[1], 0, got, 64);
	for (int i = 0; i < 16 && !ret; i++)
		bad += got[i] != src[i] + 0.5f;
	tpu_bo_close(fd, h[0]);
	tpu_bo_close(fd, h[1]);
	return ret ? ret : bad;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);

	return v && *v ? strtoull(v, NULL, 0) : def;
}

FIXTURE(storm) {
	struct tpurt_device *dev;
	struct neighbour n;
};

FIXTURE_SETUP(storm)
{
	struct drm_tpu_bo_info info = { 0 };
	uint8_t *pattern;

	ASSERT_EQ(0, tpurt_open(&self->dev)) TH_LOG("%s", tpurt_last_error());
	self->n.fd = tpurt_device_fd(self->dev);
	ASSERT_EQ(0, tpu_bo_create(self->n.fd, NEIGHBOUR_BYTES, &self->n.bo));
	pattern = malloc(NEIGHBOUR_BYTES);
	self->n.read = malloc(NEIGHBOUR_BYTES);
	ASSERT_NE(NULL, pattern);
	ASSERT_NE(NULL, self->n.read);
	for (size_t i = 0; i < NEIGHBOUR_BYTES; i++)
		pattern[i] = (uint8_t)((i * 2654435761u) >> 11);
	ASSERT_EQ(0, tpu_copy_wait(self->n.fd, DRM_TPU_COPY_TO_BO, self->n.bo, 0,
				   pattern, NEIGHBOUR_BYTES));
	self->n.sum = checksum(pattern, NEIGHBOUR_BYTES);
	free(pattern);
	info.handle = self->n.bo;
	ASSERT_EQ(0, tpu_ioctl(self->n.fd, DRM_IOCTL_TPU_BO_INFO, &info));
	self->n.map = mmap(NULL, NEIGHBOUR_BYTES, PROT_READ, MAP_SHARED,
			   self->n.fd, info.mmap_offset);
	ASSERT_NE(MAP_FAILED, self->n.map);
	ASSERT_TRUE(neighbour_intact(&self->n));
}

FIXTURE_TEARDOWN(storm)
{
	munmap(self->n.map, NEIGHBOUR_BYTES);
	free(self->n.read);
	tpurt_close(self->dev);
}

TEST_F_TIMEOUT(storm, random_ioctls_and_uring_cmds,
	       STORM_MAX_SECONDS + STORM_GRACE_SECONDS + STORM_SETTLE_SECONDS + 30)
{
	uint64_t seed = env_u64("TPU_STORM_SEED", (uint64_t)time(NULL) ^ getpid());
	uint64_t seconds = env_u64("TPU_STORM_SECONDS", STORM_SECONDS);
	unsigned long taint = tpu_taint();
	int kmsg = tpu_kmsg_mark(), have_usage, status, stragglers = 0;
	unsigned int checks = 0, damaged = 0;
	struct tpu_usage before, after;
	pid_t pid[STORM_PROCS];
	struct storm_stats *st;
	char path[64], complaint[256];
	struct stat sb;
	double end;

	/* Lines, not a buffer the harness's _exit() would drop. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (seconds > STORM_MAX_SECONDS)
		seconds = STORM_MAX_SECONDS;
	ksft_print_msg("storm seed %" PRIu64 " for %" PRIu64 " s (TPU_STORM_SEED=%" PRIu64
		       " reproduces it)\n", seed, seconds, seed);
	ASSERT_LE(0, kmsg);
	ASSERT_EQ(0, fstat(self->n.fd, &sb));
	snprintf(path, sizeof(path), "/dev/dri/renderD%u", minor(sb.st_rdev));
	have_usage = tpu_usage_read(self->n.fd, &before) != -ENOENT;
	if (have_usage)
		ASSERT_EQ(0, tpu_usage_quiet(self->n.fd, STORM_SETTLE_SECONDS, &before))
			TH_LOG("%d jobs of earlier tests still alive", before.jobs_alive);
	st = mmap(NULL, 2 * STORM_PROCS * sizeof(*st), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, st);

	end = tpu_now() + seconds;
	for (int i = 0; i < STORM_PROCS; i++) {
		pid[i] = fork();
		ASSERT_LE(0, pid[i]);
		if (!pid[i])
			storm_run(path, seed * (i + 1) + 0x5851f42d4c957f2dull * i, end,
				  &st[2 * i]);
	}
	/*
	 * The neighbour re-reads its buffer all through the storm, and
	 * interrupts the storm's waits with signals.
	 */
	for (unsigned int round = 0; tpu_now() < end; round++) {
		if (round % 10 == 0) {
			damaged += !neighbour_intact(&self->n);
			checks++;
		}
		kill(pid[round % STORM_PROCS], SIGUSR1);
		usleep(20000);
	}
	for (int i = 0; i < STORM_PROCS; i++) {
		double grace = end + STORM_GRACE_SECONDS;
		pid_t got;

		while ((got = waitpid(pid[i], &status, WNOHANG)) == 0 && tpu_now() < grace)
			usleep(50000);
		if (!got) {
			stragglers++;
			kill(pid[i], SIGKILL);
			waitpid(pid[i], &status, 0);
		}
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("storm process %d: status %#x", i, status);
		for (int t = 0; t < 2; t++) {
			const struct storm_stats *x = &st[2 * i + t];

			ksft_print_msg("storm %d.%d: %" PRIu64 " ioctls (%" PRIu64 " ok: %" PRIu64
				       " jobs, %" PRIu64 " copies, %" PRIu64 " buffers), %" PRIu64
				       " maps, %" PRIu64 " reopens, %" PRIu64 " uring_cmds (%" PRIu64
				       " CQEs, %" PRIu64 " ok)\n", i, t, x->ioctls, x->ioctls_ok,
				       x->jobs, x->copies, x->bos, x->maps, x->reopens,
				       x->urings, x->cqes, x->cqes_ok);
			/*
			 * A storm that did nothing tested nothing. A slow
			 * guest (the debug kernel's KASAN) manages 16 a
			 * second: the floor is well below that.
			 */
			EXPECT_LT(20, x->ioctls);
			EXPECT_LT(0, x->jobs + x->copies);
		}
	}
	EXPECT_EQ(0, stragglers) TH_LOG("%d storm processes did not end in time", stragglers);

	EXPECT_EQ(0, damaged) TH_LOG("the neighbour's buffer changed in %u of %u checks",
				     damaged, checks);
	EXPECT_TRUE(neighbour_intact(&self->n));
	EXPECT_EQ(0, normal_job(self->n.fd));
	if (have_usage) {
		EXPECT_EQ(0, tpu_usage_settle(self->n.fd, &before, STORM_SETTLE_SECONDS, &after))
			TH_LOG("after: %lu HBM bytes in %lu buffers, %d jobs, %d files, %d reports; before: %lu, %lu, %d, %d, %d",
			       after.hbm_bytes, after.hbm_buffers, after.jobs_alive,
			       after.clients, after.reports, before.hbm_bytes,
			       before.hbm_buffers, before.jobs_alive, before.clients,
			       before.reports);
	} else {
		ksft_print_msg("no debugfs usage: freeing not checked\n");
	}
	EXPECT_EQ(0, tpu_kmsg_complaints(kmsg, complaint, sizeof(complaint)))
		TH_LOG("kernel log: %s", complaint);
	EXPECT_EQ(0, tpu_taint() & ~taint & TPU_TAINT_COMPLAINTS)
		TH_LOG("taint %#lx, was %#lx", tpu_taint(), taint);
	munmap(st, 2 * STORM_PROCS * sizeof(*st));
}

TPU_HARNESS_MAIN
