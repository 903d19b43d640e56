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
 * The message of the calling thread's most recent failed call, or "" if
 * none failed yet. Valid until the thread's next failing call.
 */
const char *tpurt_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TPURT_H */
