/* SPDX-License-Identifier: MIT */
/*
 * libtpurt: the tpuemu runtime.
 *
 * Every function that can fail returns 0 or a negative errno value; a
 * readable message for the calling thread's most recent failure is then
 * available from tpurt_last_error(). errno itself is left alone.
 */
#ifndef TPURT_H
#define TPURT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tpurt_device;

/**
 * struct tpurt_device_info - identity and capabilities of a device
 *
 * Sizes are in bytes, rates per second, costs in nanoseconds. The rates and
 * costs are those of the chip the device models, not of the host.
 */
struct tpurt_device_info {
	char node[64];			/* render node path */
	char driver[32];		/* kernel driver name */
	uint32_t hw_version;		/* register ABI, major << 16 | minor */
	uint64_t hbm_size;
	uint64_t vmem_size;		/* physical VMEM per core */
	uint64_t vmem_limit;		/* default scoped VMEM limit */
	uint64_t smem_size;
	uint32_t cores;			/* TensorCores */
	uint32_t mxu_dim;		/* each MXU is mxu_dim x mxu_dim */
	uint32_t mxu_count;		/* MXUs per core */
	uint64_t peak_flops_bf16;
	uint64_t peak_flops_f32;
	uint64_t peak_ops_int8;
	uint64_t hbm_bandwidth;		/* bytes per second */
	uint64_t step_cost_ns;		/* fixed cost of one grid step */
	uint64_t launch_cost_ns;	/* fixed cost of one job */
};

/*
 * Open the device named by $TPURT_DEVICE (a render node path) or, if it is
 * unset, the first render node whose driver is "tpu".
 * Errors: -ENODEV no tpu device; -ENOENT, -EACCES opening the node.
 */
int tpurt_open(struct tpurt_device **devp);

/* Open the render node at @path; -ENODEV if its driver is not "tpu". */
int tpurt_open_path(const char *path, struct tpurt_device **devp);

/* Close a device opened by tpurt_open(); NULL is ignored. */
void tpurt_close(struct tpurt_device *dev);

/* The device's file descriptor, for the raw uAPI of uapi/tpu_drm.h. */
int tpurt_device_fd(const struct tpurt_device *dev);

/* Fill @info with the device's identity and capabilities. */
int tpurt_device_info(struct tpurt_device *dev, struct tpurt_device_info *info);

/* --- Buffers: ranges of the device's HBM --- */

struct tpurt_buffer;

/* Allocate @size bytes of HBM, zeroed. -ENOSPC when HBM is full. */
int tpurt_buffer_create(struct tpurt_device *dev, uint64_t size,
			struct tpurt_buffer **bufp);
/* Free a buffer; pending copies that use it still complete. NULL is ignored. */
void tpurt_buffer_free(struct tpurt_buffer *buf);
uint64_t tpurt_buffer_size(const struct tpurt_buffer *buf);
/* The buffer's GEM handle on tpurt_device_fd(), for the raw uAPI. */
uint32_t tpurt_buffer_handle(const struct tpurt_buffer *buf);
/* Copy host memory into [@offset, @offset + @len) of @buf, by DMA, and wait. */
int tpurt_buffer_write(struct tpurt_buffer *buf, uint64_t offset,
		       const void *src, uint64_t len);
/* Copy [@offset, @offset + @len) of @buf into host memory, by DMA, and wait. */
int tpurt_buffer_read(struct tpurt_buffer *buf, uint64_t offset, void *dst,
		      uint64_t len);
/* Copy between buffers (HBM to HBM) and wait. */
int tpurt_buffer_copy(struct tpurt_buffer *dst, uint64_t dst_offset,
		      struct tpurt_buffer *src, uint64_t src_offset,
		      uint64_t len);
/*
 * Map the buffer for direct (write-combined) access; the mapping lives until
 * the buffer is freed. Returns NULL on failure.
 */
void *tpurt_buffer_map(struct tpurt_buffer *buf);

/* --- Arrays: a dtype and a shape over a buffer --- */

enum tpurt_dtype {
	TPURT_F32 = 0,
	TPURT_BF16 = 1,
	TPURT_INT8 = 2,
	TPURT_UINT8 = 3,
	TPURT_INT32 = 4,
};

#define TPURT_MAX_RANK 4

/* Bytes per element, or 0 for an unknown dtype. */
size_t tpurt_dtype_size(enum tpurt_dtype dtype);
/* "float32", "bfloat16", "int8", "uint8", "int32" (NumPy's names). */
const char *tpurt_dtype_name(enum tpurt_dtype dtype);
/* bf16 <-> f32, rounding to nearest even (NaN stays NaN). */
uint16_t tpurt_f32_to_bf16(float f);
float tpurt_bf16_to_f32(uint16_t h);

struct tpurt_array;

/* A new zeroed array; @rank 1..TPURT_MAX_RANK, every dim > 0. */
int tpurt_array_create(struct tpurt_device *dev, enum tpurt_dtype dtype,
		       int rank, const int64_t *shape,
		       struct tpurt_array **arrayp);
void tpurt_array_free(struct tpurt_array *a);
enum tpurt_dtype tpurt_array_dtype(const struct tpurt_array *a);
int tpurt_array_rank(const struct tpurt_array *a);
int64_t tpurt_array_dim(const struct tpurt_array *a, int axis);
uint64_t tpurt_array_size(const struct tpurt_array *a);	/* elements */
uint64_t tpurt_array_nbytes(const struct tpurt_array *a);
struct tpurt_buffer *tpurt_array_buffer(const struct tpurt_array *a);
/* Whole-array copies from/to row-major host memory of the array's dtype. */
int tpurt_array_write(struct tpurt_array *a, const void *src);
int tpurt_array_read(const struct tpurt_array *a, void *dst);
/* Set every element to @value, converted to the dtype (saturating ints). */
int tpurt_array_fill(struct tpurt_array *a, double value);
/* Direct access to the elements, row-major; NULL on failure. */
void *tpurt_array_map(struct tpurt_array *a);

/*
 * NumPy .npy files (format 1.0-3.0, C order, little-endian). bfloat16 is
 * saved as '<u2' holding the raw bits (ml_dtypes' bfloat16 has no portable
 * descr): load it in NumPy with np.load(p).view(ml_dtypes.bfloat16). On
 * load, @as_bf16 reads a '<u2' file as bfloat16; '|V2' files load as
 * bfloat16 too.
 */
int tpurt_array_load_npy(struct tpurt_device *dev, const char *path,
			 int as_bf16, struct tpurt_array **arrayp);
int tpurt_array_save_npy(const struct tpurt_array *a, const char *path);

/*
 * --- Queues: batched, asynchronous submission of copies and grid jobs ---
 *
 * A queue collects copies and jobs (tpurt_queue_write/read/copy/job), hands
 * them to the kernel in one go (tpurt_queue_submit) and reports their
 * outcomes in batches (tpurt_queue_reap). Order between commands is the
 * device's business: a command waits for the syncobjs in its deps->wait
 * and signals deps->signal, so "copy in, job, copy back" needs no waiting
 * in userspace. Commands with no dependency between them may complete in
 * any order (copies and jobs run on different device queues; one file's
 * jobs run in submission order).
 *
 * Two paths to the kernel, chosen per device: io_uring (the driver's
 * DRM_TPU_URING_CMD_* commands: one system call per batch, completions read
 * from the ring) or ioctls (one or more system calls per command,
 * completions through sync_file polls). TPURT_PATH_AUTO, the default, takes
 * io_uring when the kernel and the driver support it.
 *
 * Host memory of a write or read, and every buffer, must stay valid until
 * the command's completion is reaped; descriptors and deps are copied
 * when enqueued. A queue is not thread-safe.
 */

enum tpurt_submit_path {
	TPURT_PATH_AUTO = 0,	/* io_uring if supported, else ioctl */
	TPURT_PATH_URING = 1,
	TPURT_PATH_IOCTL = 2,
};

/*
 * Choose the path of queues created on @dev from now on. -EOPNOTSUPP if
 * TPURT_PATH_URING is asked for and the kernel cannot do it.
 */
int tpurt_device_set_submit_path(struct tpurt_device *dev,
				 enum tpurt_submit_path path);
/* The path new queues of @dev take: TPURT_PATH_URING or TPURT_PATH_IOCTL. */
enum tpurt_submit_path tpurt_device_submit_path(struct tpurt_device *dev);

/* Syncobjs: dependency tokens between commands, on tpurt_device_fd(). */
int tpurt_sync_create(struct tpurt_device *dev, uint32_t *syncp);
void tpurt_sync_destroy(struct tpurt_device *dev, uint32_t sync);

#define TPURT_QUEUE_MAX_WAIT	8

/* What a command waits for and signals; NULL for neither. */
struct tpurt_deps {
	const uint32_t *wait;	/* syncobjs; copies take at most one */
	unsigned int nwait;	/* at most TPURT_QUEUE_MAX_WAIT */
	uint32_t signal;	/* syncobj signalled when done, or 0 */
};

/* The outcome of one command. */
struct tpurt_completion {
	uint64_t user_data;	/* as given when enqueued */
	int32_t status;		/* 0, or -EIO, -ETIMEDOUT, -ECANCELED (on the
				 * device), or the refusal (-EINVAL, -ENOENT,
				 * -EFAULT...) */
	uint32_t reserved;
	uint64_t job_id;	/* TPURT_JOB_RECORD jobs: for JOB_INFO; else 0 */
};

struct tpurt_queue;

/*
 * A queue of up to @entries (1..4096) commands enqueued or in flight at
 * once. Errors: -EINVAL, -ENOMEM, and those of io_uring_queue_init().
 */
int tpurt_queue_create(struct tpurt_device *dev, unsigned int entries,
		       struct tpurt_queue **qp);
/* Submit what is enqueued, wait for everything in flight, free. */
void tpurt_queue_destroy(struct tpurt_queue *q);
/* TPURT_PATH_URING or TPURT_PATH_IOCTL. */
enum tpurt_submit_path tpurt_queue_path(const struct tpurt_queue *q);

/*
 * Enqueue a copy of host memory into a buffer, of a buffer into host
 * memory, or between buffers. -EBUSY when @entries commands are enqueued or
 * in flight (reap some), -EINVAL for bad arguments or deps.
 */
int tpurt_queue_write(struct tpurt_queue *q, struct tpurt_buffer *dst,
		      uint64_t offset, const void *src, uint64_t len,
		      const struct tpurt_deps *deps, uint64_t user_data);
int tpurt_queue_read(struct tpurt_queue *q, struct tpurt_buffer *src,
		     uint64_t offset, void *dst, uint64_t len,
		     const struct tpurt_deps *deps, uint64_t user_data);
int tpurt_queue_copy(struct tpurt_queue *q, struct tpurt_buffer *dst,
		     uint64_t dst_offset, struct tpurt_buffer *src,
		     uint64_t src_offset, uint64_t len,
		     const struct tpurt_deps *deps, uint64_t user_data);

/* Flags of tpurt_queue_job() */
#define TPURT_JOB_RECORD	(1u << 0)	/* keep a JOB_INFO record */

/*
 * Enqueue a grid job: @desc (uapi/tpu_job.h, copied now), its buffer table
 * @slots[0..@nslots), a run-time limit (0: the driver's default).
 */
int tpurt_queue_job(struct tpurt_queue *q, const void *desc, size_t desc_size,
		    struct tpurt_buffer *const *slots, unsigned int nslots,
		    uint32_t timeout_ms, unsigned int flags,
		    const struct tpurt_deps *deps, uint64_t user_data);

/*
 * Hand every enqueued command to the kernel. Returns how many were, or a
 * negative errno (then nothing was lost: the commands stay enqueued).
 */
int tpurt_queue_submit(struct tpurt_queue *q);

/*
 * Collect up to @max completions into @out, waiting up to @timeout_ms
 * (-1: no limit) for the first one if none is ready. Submits what is
 * enqueued first. Returns how many (0 on timeout or when nothing is in
 * flight), or a negative errno.
 */
int tpurt_queue_reap(struct tpurt_queue *q, struct tpurt_completion *out,
		     unsigned int max, int timeout_ms);

/* Commands enqueued or in flight whose completion is not reaped yet. */
unsigned int tpurt_queue_pending(const struct tpurt_queue *q);

/*
 * The message of the calling thread's most recent failed call, or "" if
 * none failed yet. Valid until the thread's next failing call.
 */
const char *tpurt_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TPURT_H */
