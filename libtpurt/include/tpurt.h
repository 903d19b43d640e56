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
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tpurt_device;

/**
 * struct tpurt_device_info - identity and capabilities of a device
 *
 * Sizes are in bytes, rates per second, costs in nanoseconds. The rates and
 * costs are those of the chip the device models, not of the host. The fields
 * from hbm_size on are the device's parameters, as uapi/tpu_params.h lists
 * them (checked when libtpurt is built).
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
	uint64_t vpu_elems_per_s;	/* vector ALUs, per core */
	uint64_t eup_elems_per_s;	/* transcendental unit, per core */
};

/*
 * Open the device named by $TPURT_DEVICE or, if it is unset, the first
 * render node whose driver is "tpu". TPURT_DEVICE is a render node's path,
 * or "sim" for the in-process device (tpurt_open_sim's defaults), or
 * "sim:cores=2,hbm-size=2G,..." with the QEMU device's parameter names.
 * Errors: -ENODEV no tpu device; -ENOENT, -EACCES opening the node;
 * -EINVAL, -ERANGE a bad "sim:" parameter; tpurt_open_sim's.
 */
int tpurt_open(struct tpurt_device **devp);

/* Open the render node at @path; -ENODEV if its driver is not "tpu". */
int tpurt_open_path(const char *path, struct tpurt_device **devp);

/*
 * An in-process device: the device's engine linked into the program, HBM in
 * host memory, copies by memcpy, jobs run on the calling thread. Buffers,
 * arrays and pallas_call work on it exactly as on a render node; host tests
 * use it to run real jobs without a VM. Each field left 0 takes the device's
 * default (a TPU v5e, as the QEMU device's properties); the fields are the
 * device's parameters of uapi/tpu_params.h, in its order. The device is
 * libtpurt-sim.so.0 (the engine, OpenBLAS), which libtpurt.so.0 loads from
 * beside itself or the loader's path on first use; -EOPNOTSUPP if it
 * cannot. libtpurt-sim.a has it linked in.
 */
struct tpurt_sim_config {
	uint64_t hbm_size;		/* power of two, default 1 GiB */
	uint64_t vmem_size;
	uint64_t vmem_limit;		/* default scoped VMEM limit */
	uint64_t smem_size;
	uint32_t cores;
	uint32_t mxu_dim;
	uint32_t mxu_count;
	uint64_t peak_flops_bf16;
	uint64_t peak_flops_f32;
	uint64_t peak_ops_int8;
	uint64_t hbm_bandwidth;
	uint64_t step_cost_ns;
	uint64_t launch_cost_ns;
	uint64_t vpu_elems_per_s;
	uint64_t eup_elems_per_s;
};

/* @cfg may be NULL (all defaults). */
int tpurt_open_sim(const struct tpurt_sim_config *cfg,
		   struct tpurt_device **devp);

/* Close a device opened by tpurt_open(); NULL is ignored. */
void tpurt_close(struct tpurt_device *dev);

/* The device's file descriptor, for the raw uAPI of uapi/tpu_drm.h; -1 for
 * an in-process device. */
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
	TPURT_BOOL = 5,			/* a mask: one byte, 0 false, else true */
	TPURT_UINT32 = 6,		/* XLA's u32: arithmetic wraps */
};

#define TPURT_MAX_RANK 4

/* Bytes per element, or 0 for an unknown dtype. */
size_t tpurt_dtype_size(enum tpurt_dtype dtype);
/*
 * "float32", "bfloat16", "int8", "uint8", "int32", "bool", "uint32"
 * (NumPy's names).
 */
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
 * A transpose view (the guide's y.swapaxes(0, 1)): a rank-2 array whose
 * logical shape is @a's reversed, over @a's buffer, with no copy. Handed to
 * tpurt_matmul() or tpurt_matmul_vjp() as an operand, it makes the kernel
 * read @a's blocks transposed through dot_general's contraction dims (the
 * transpose_lhs/transpose_rhs paths). A view of a view is untransposed.
 * The view borrows the buffer: free it (tpurt_array_free) before @a.
 * Host copies, map, fill and tpurt_array_buffer() act on the storage in
 * its physical (@a's) order; save_npy writes the logical shape in Fortran
 * order. pallas_call refuses transposed views (pass @a and a transposed
 * block spec) and no op writes into one.
 */
int tpurt_array_transpose_view(const struct tpurt_array *a,
			       struct tpurt_array **viewp);
/* 1 if @a is a transposed view, else 0. */
int tpurt_array_is_transposed(const struct tpurt_array *a);

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

/* --- Index maps: the guide's lambdas as text, for the scalar core --- */

/*
 * An index map or predicate is written like the guide's lambda, without the
 * word lambda:
 *
 *	"i, j, k -> i, k"		BlockSpec((bm, bk), lambda i, j, k: (i, k))
 *	"i, j, k, s -> s[i], k"		with one scalar-prefetch ref, s
 *	"i, j, k -> k == num_programs(k) - 1"	a predicate (pl.when)
 *	"k == 0"			a predicate in the grid's index names
 *
 * Left of "->": the grid indices, one name per grid dimension, then
 * optionally names for the scalar-prefetch refs in their order (as Pallas
 * passes them). Without "->" the grid spec's index names are used (default
 * i, j, k, l). A scalar-prefetch operand can always be named by the name it
 * was added under. Right of "->": comma-separated expressions, one per
 * block dimension (one for a predicate), over
 *	integers (32-bit), grid index names, ref[expr] (an SMEM load;
 *	ref[i, j] for a 2-D ref, see prefetch_cols),
 *	num_programs(d) and program_id(d) (d a grid index name or number),
 *	min(a, b), max(a, b), unary -, * // % (Python's floor division and
 *	modulo), + -, == != < <= > >= (not chained), not, and, or,
 *	and parentheses; precedence as in Python.
 * Values are 64-bit signed on the device.
 */
#define TPURT_PROGRAM_MAX_LEN	64	/* instructions in one program */

/* One scalar-core instruction (uapi/tpu_job.h's struct tpu_job_insn). */
struct tpurt_insn {
	uint8_t op;			/* enum tpu_insn_op */
	int32_t arg;
};

struct tpurt_program {
	unsigned int len;
	unsigned int nresults;		/* values it leaves on the stack */
	struct tpurt_insn insn[TPURT_PROGRAM_MAX_LEN];
};

/* What names an index map may use. */
struct tpurt_index_map_env {
	int grid_rank;
	const char *index_names;	/* for text without "->"; NULL: i, j, k, l */
	int num_prefetch;
	const char *const *prefetch_names;
	/* per scalar-prefetch ref, the row length of a 2-D one (read as
	 * s[i, j]) or 0; NULL: all 1-D */
	const int64_t *prefetch_cols;
};

/*
 * Compile @text into @prog. On a syntax or name error returns -EINVAL with
 * a message giving the column (1-based) and a caret line under the text.
 */
int tpurt_index_map_compile(const char *text,
			    const struct tpurt_index_map_env *env,
			    struct tpurt_program *prog);
/* @prog in postfix ("pid0 pid2", "pid2 nprog2 1 - =="); -ENOSPC if @len is short. */
int tpurt_program_format(const struct tpurt_program *prog, char *buf,
			 size_t len);

/* --- Block specs and grid specs (pl.BlockSpec, PrefetchScalarGridSpec) --- */

/*
 * A block dimension of extent 1 that the kernel's ref drops (None or
 * pl.Squeezed() in block_shape): a (TPURT_SQUEEZED, bq, d) block of a
 * (batch * heads, seq, d) array is a (bq, d) ref in statements. Its index
 * map gives the element index, as for a block of 1.
 */
#define TPURT_SQUEEZED	(-1)

/*
 * Where an operand's blocks or a scratch live (Pallas's memory_space).
 * TPURT_ANY leaves an operand in HBM: no blocks, no automatic copies; the
 * kernel moves what it needs with async copies. Semaphores are scratch
 * only: an int32 array of rank 1 ({ 1 } for a single one).
 */
enum tpurt_memory_space {
	TPURT_VMEM = 0,			/* pltpu.VMEM: blocked, pipelined */
	TPURT_SMEM = 1,			/* pltpu.SMEM: blocked scalars (32-bit) */
	TPURT_ANY = 2,			/* pl.ANY, pltpu.HBM: operands only */
	TPURT_SEMAPHORE_DMA = 3,	/* pltpu.SemaphoreType.DMA: scratch only */
	TPURT_SEMAPHORE_REGULAR = 4,	/* pltpu.SemaphoreType.REGULAR */
};

/*
 * pl.RevisitMode of an output's blocks (pl.Buffered(1, revisit=...)):
 * IMMEDIATE, the default, keeps a block in VMEM while its index repeats and
 * writes it back when it changes; ANY also reads each new block back from
 * HBM, so the grid may return to a block after others and continue from
 * its data. ANY takes buffer_count 1 (VMEM) or an SMEM output.
 */
enum tpurt_revisit_mode {
	TPURT_REVISIT_IMMEDIATE = 0,
	TPURT_REVISIT_ANY = 1,
};

/*
 * pl.BlockSpec(block_shape, index_map, memory_space=...,
 * pipeline_mode=pl.Buffered(buffer_count, revisit=...)); a value, cheap to
 * copy. The fields after the index map may be left out of an initialiser:
 * zero is VMEM with the default double buffering, immediate revisits. For TPURT_ANY the block shape and index map
 * are not used (rank 0 and a NULL index map are fine; a rank and shape
 * given declare the array's shape, which statements then check against
 * and pallas_call checks the array has).
 */
struct tpurt_block_spec {
	int rank;
	int64_t shape[TPURT_MAX_RANK];
	const char *index_map;		/* copied when added to a grid spec */
	enum tpurt_memory_space memory_space;
	int buffer_count;		/* pl.Buffered(n), 1..8 (VMEM); 0: 2 */
	/*
	 * pl.Element(n): bit d set, the index map gives dimension d's first
	 * element, not its block; pl.Element(n, (low, high)): element_pad[d]
	 * = low (0..65535), the array read as if @low elements came before it
	 * (zeros; a block may overhang the array's end without a high pad).
	 */
	unsigned int element_dims;
	int64_t element_pad[TPURT_MAX_RANK];
	enum tpurt_revisit_mode revisit;	/* outputs only */
};

struct tpurt_grid_spec;

/* A grid of @rank (1..4) dimensions of @grid[d] >= 1 steps each. */
int tpurt_grid_spec_create(int rank, const int64_t *grid,
			   struct tpurt_grid_spec **gsp);
void tpurt_grid_spec_free(struct tpurt_grid_spec *gs);
/* Names of the grid indices for index maps without "->" ("i, j, k"). */
int tpurt_grid_spec_set_index_names(struct tpurt_grid_spec *gs,
				    const char *names);
/*
 * Operands, in Pallas's order within each kind. Scalar-prefetch operands
 * (int32 arrays loaded into SMEM) come before any input or output, because
 * index maps may read them. Index maps are compiled here: errors name the
 * operand and point at the character. Names are unique across all refs.
 */
int tpurt_grid_spec_add_scalar_prefetch(struct tpurt_grid_spec *gs,
					const char *name);
/*
 * A scalar-prefetch operand of @rank 1 or 2 and @shape: index maps and
 * statements read a 2-D one as name[i, j] (row-major). pallas_call checks
 * that the array given has this shape.
 */
int tpurt_grid_spec_add_scalar_prefetch_shaped(struct tpurt_grid_spec *gs,
					       const char *name, int rank,
					       const int64_t *shape);
int tpurt_grid_spec_add_input(struct tpurt_grid_spec *gs, const char *name,
			      const struct tpurt_block_spec *spec);
int tpurt_grid_spec_add_output(struct tpurt_grid_spec *gs, const char *name,
			       const struct tpurt_block_spec *spec);
/*
 * The dtype of input or output @name: what kernel statements read and
 * write (tpurt_kernel_stmt). pallas_call checks the array given has it.
 */
int tpurt_grid_spec_set_dtype(struct tpurt_grid_spec *gs, const char *name,
			      enum tpurt_dtype dtype);
/*
 * scratch_shapes: pltpu.VMEM(shape, dtype), pltpu.SMEM(shape, dtype), or
 * an array of semaphores, pltpu.SemaphoreType.DMA((n,)) or ((n, m)): @space
 * TPURT_SEMAPHORE_DMA or TPURT_SEMAPHORE_REGULAR, @dtype TPURT_INT32,
 * @rank 1 to 4, @shape { n } (n = 1 for a single semaphore) or { n, m },
 * ..., 256 semaphores at most, held flat and indexed row-major.
 */
int tpurt_grid_spec_add_scratch(struct tpurt_grid_spec *gs, const char *name,
				enum tpurt_memory_space space,
				enum tpurt_dtype dtype, int rank,
				const int64_t *shape);

/* pltpu.CompilerParams. A zeroed struct (or NULL) means the defaults. */
#define TPURT_DEBUG	(1u << 0)	/* poison scratch and new output blocks, report hazards */
/*
 * pallas_call(interpret=True): block shapes need not follow Pallas TPU's
 * (8, 128) tiling of the last two dimensions, as Pallas's interpreter
 * takes any; the job runs on the device all the same.
 */
#define TPURT_INTERPRET	(1u << 1)

/*
 * One entry of pallas_call's input_output_aliases: @input is an index
 * among ALL the call's arrays in Pallas order (scalar prefetch included,
 * as Pallas counts), @output an index among the outputs. The output is the
 * input's array: its initial contents are the input's; blocks the job
 * never visits (or, in TPURT_ANY, bytes no copy writes) keep them, while
 * a visited block is written back whole, as in Pallas. Pass the input's
 * array again in the output's place (or NULL there).
 */
struct tpurt_alias {
	int input;
	int output;
};

struct tpurt_compiler_params {
	/* "parallel, parallel, arbitrary"; NULL: every dimension arbitrary */
	const char *dimension_semantics;
	uint64_t vmem_limit_bytes;	/* 0: the device's default limit */
	unsigned int flags;		/* TPURT_DEBUG, TPURT_INTERPRET */
	/* the job's run-time limit on the device, 0: the driver's (10 s) */
	uint32_t timeout_ms;
	const struct tpurt_alias *input_output_aliases;
	int num_aliases;
};

/* --- Kernels: the body, as a list of operations on refs --- */

/*
 * Refs are named as in the grid spec, or "#N" for the N-th ref in Pallas's
 * order: scalar-prefetch refs, inputs, outputs, scratch. Names are resolved
 * by pallas_call, so one kernel serves several grid specs. A ref of a block
 * or scratch of rank r is 2-D in the body: its last dimension is the
 * columns, the product of the others the rows.
 */
struct tpurt_kernel;

enum tpurt_unary {
	TPURT_IDENTITY = 0,		/* a cast/store */
	TPURT_RELU = 1,
	TPURT_GELU = 2,			/* jax.nn.gelu, tanh form */
	TPURT_SILU = 3,
	TPURT_SIGMOID = 4,
	TPURT_TANH = 5,
	TPURT_EXP = 6,
	TPURT_NEG = 7,
	TPURT_ABS = 8,
	TPURT_RECIPROCAL = 9,		/* pl.reciprocal */
	TPURT_SQRT = 10,
	TPURT_RSQRT = 11,		/* lax.rsqrt */
	TPURT_LOG = 12,
	TPURT_LOG1P = 13,
	TPURT_EXP2 = 14,
	TPURT_SQUARE = 15,
	TPURT_FLOOR = 16,
	TPURT_CEIL = 17,
	TPURT_SIGN = 18,
	TPURT_NOT = 19,			/* logical not of a mask */
	TPURT_CLAMP = 20,		/* jnp.clip: tpurt_kernel_clamp() */
	TPURT_ROUND = 21,		/* to nearest, ties to even */
	TPURT_SIN = 22,
	TPURT_COS = 23,
	TPURT_ERF = 24,			/* lax.erf */
	TPURT_POPCNT = 25,		/* lax.population_count: integers only */
	TPURT_CLZ = 26,			/* lax.clz: integers only */
};

enum tpurt_binary {
	TPURT_ADD = 0,
	TPURT_SUB = 1,
	TPURT_MUL = 2,
	TPURT_MAX = 3,
	TPURT_MIN = 4,
	TPURT_DIV = 5,			/* integers: floor division */
	TPURT_POW = 6,
	TPURT_MOD = 7,			/* Python's %: the sign of b */
	TPURT_EQ = 8,			/* compares give 1 or 0: a mask */
	TPURT_NE = 9,
	TPURT_LT = 10,
	TPURT_LE = 11,
	TPURT_GT = 12,
	TPURT_GE = 13,
	TPURT_AND = 14,			/* logical, of masks */
	TPURT_OR = 15,
	TPURT_BITAND = 16,		/* integers only, from here on */
	TPURT_BITOR = 17,
	TPURT_BITXOR = 18,
	TPURT_SHL = 19,
	TPURT_SHR = 20,			/* arithmetic */
	TPURT_SHR_LOGICAL = 21,
};

enum tpurt_reduce {
	TPURT_REDUCE_SUM = 0,		/* jnp.sum */
	TPURT_REDUCE_MAX = 1,		/* jnp.max */
	TPURT_REDUCE_MIN = 2,		/* jnp.min */
	TPURT_REDUCE_ARGMAX = 3,	/* jnp.argmax: int32 indices */
	TPURT_REDUCE_ARGMIN = 4,
};

enum tpurt_broadcast {
	TPURT_BCAST_NONE = 0,		/* b has a's shape */
	TPURT_BCAST_ROW = 1,		/* b is 1 x cols, for every row (a bias) */
	TPURT_BCAST_COL = 2,		/* b is rows x 1, for every column */
	TPURT_BCAST_IMM = 4,		/* no ref: an immediate (struct tpurt_value) */
};

/*
 * One side of tpurt_kernel_select(): a ref read whole, as a row or as a
 * column (@bcast NONE, ROW, COL), or the immediate @imm (@bcast IMM, @ref
 * NULL).
 */
struct tpurt_value {
	const char *ref;
	enum tpurt_broadcast bcast;
	float imm;
};

/* tpurt_kernel_dot() flags; the contraction dims of lax.dot_general. */
#define TPURT_DOT_ACCUMULATE	(1u << 0)	/* dst += ...; else dst = ... */
#define TPURT_DOT_TRANSPOSE_LHS	(1u << 1)	/* lhs.T @ rhs: contract lhs dim 0 */
#define TPURT_DOT_TRANSPOSE_RHS	(1u << 2)	/* lhs @ rhs.T: contract rhs dim 1 */

int tpurt_kernel_create(struct tpurt_kernel **kp);
void tpurt_kernel_free(struct tpurt_kernel *k);
/*
 * pl.when(@pred): the operations added until the matching
 * tpurt_kernel_end_when() run only at steps where @pred holds. Nests (up
 * to 4 deep): the predicates are and-ed.
 */
int tpurt_kernel_when(struct tpurt_kernel *k, const char *pred);
int tpurt_kernel_end_when(struct tpurt_kernel *k);
/*
 * A loop on the device (lax.fori_loop, pl.loop): the operations added
 * until the matching tpurt_kernel_end_loop() run once per trip, the trip
 * index from @lo to @hi - 1 (index-map expressions of the body, evaluated
 * once when the loop is entered; no trip when hi <= lo). Inside, the
 * body's scalar-core expressions read the index of the loop at depth d
 * (0 the outermost) as loop_index(d). The when() blocks open around the
 * loop decide whether it runs at all; when() blocks opened inside close
 * inside. Nests up to 4 deep; at most 2^24 trips each time it is entered.
 */
int tpurt_kernel_loop(struct tpurt_kernel *k, const char *lo, const char *hi);
/*
 * lax.while_loop: the body runs while @cond (an index-map expression of
 * the body, evaluated before every trip: SMEM the body's scalar stores
 * change) holds, at most @max_trips trips (0: 2^24); the job fails if it
 * still holds then. loop_index(d) counts trips from 0.
 */
int tpurt_kernel_while(struct tpurt_kernel *k, const char *cond,
		       int64_t max_trips);
int tpurt_kernel_end_loop(struct tpurt_kernel *k);
/* Loops open at the next operation added (for loop_index(d)'s d). */
int tpurt_kernel_loop_depth(const struct tpurt_kernel *k);
/* dst[...] = 0 */
int tpurt_kernel_zero(struct tpurt_kernel *k, const char *dst);
/*
 * dst (+)= dot_general(lhs, rhs): f32 x f32 or bf16 x bf16 into f32,
 * int8/uint8 x int8/uint8 into int32 (preferred_element_type).
 */
int tpurt_kernel_dot(struct tpurt_kernel *k, const char *dst, const char *lhs,
		     const char *rhs, unsigned int flags);
/* dst[...] = fn(src[...]).astype(dst.dtype); IDENTITY is a cast/store. */
int tpurt_kernel_unary(struct tpurt_kernel *k, enum tpurt_unary fn,
		       const char *dst, const char *src);
int tpurt_kernel_store(struct tpurt_kernel *k, const char *dst,
		       const char *src);
/* dst[...] = fn(a[...], b broadcast as @bcast).astype(dst.dtype) */
int tpurt_kernel_binary(struct tpurt_kernel *k, enum tpurt_binary fn,
			const char *dst, const char *a, const char *b,
			enum tpurt_broadcast bcast);
/* dst[...] = fn(a[...], @value) */
int tpurt_kernel_binary_scalar(struct tpurt_kernel *k, enum tpurt_binary fn,
			       const char *dst, const char *a, float value);
/*
 * dst[...] = fn(a[...], smem[index]): @smem a scalar-prefetch ref or SMEM
 * scratch, @index an expression like an index map's ("i * 4 + k").
 */
int tpurt_kernel_binary_smem(struct tpurt_kernel *k, enum tpurt_binary fn,
			     const char *dst, const char *a, const char *smem,
			     const char *index);
/*
 * dst[...] = fn(a[...], s) with s a scalar the scalar core computes at each
 * step, @expr in the index-map syntax: "program_id(2) * 128",
 * "num_programs(k) - 1", "lens[i] - k * 128" (a 64-bit integer).
 */
int tpurt_kernel_binary_expr(struct tpurt_kernel *k, enum tpurt_binary fn,
			     const char *dst, const char *a, const char *expr);
/*
 * dst[...] = fn(src[...], axis=@axis, keepdims=True): @axis 1 reduces each
 * row (dst is rows x 1), @axis 0 each column (dst is 1 x cols).
 */
int tpurt_kernel_reduce(struct tpurt_kernel *k, enum tpurt_reduce fn,
			const char *dst, const char *src, int axis);
/* dst[...] = jnp.clip(src[...], @lo, @hi) */
int tpurt_kernel_clamp(struct tpurt_kernel *k, const char *dst,
		       const char *src, float lo, float hi);
/*
 * dst[...] = jnp.where(cond[...], a, b): @cond a mask (any dtype, non-zero
 * is true) of dst's shape; @a and @b refs (whole, a row or a column) or
 * immediates.
 */
int tpurt_kernel_select(struct tpurt_kernel *k, const char *dst,
			const char *cond, const struct tpurt_value *a,
			const struct tpurt_value *b);
/*
 * dst[...] = lax.broadcasted_iota(dst.dtype, dst.shape, @axis) + offset:
 * @offset an index-map expression ("program_id(2) * 128"), or NULL for 0.
 */
int tpurt_kernel_iota(struct tpurt_kernel *k, const char *dst, int axis,
		      const char *offset);
/* dst[...] = src[...].T: dst is src's columns by its rows, of its dtype. */
int tpurt_kernel_transpose(struct tpurt_kernel *k, const char *dst,
			   const char *src);
/*
 * dst[...] = pltpu.roll(src[...], shift, @axis), which is jnp.roll: the
 * element at i along @axis moves to (i + shift) mod the extent; @shift an
 * index-map expression ("3", "program_id(0) * 8"), negative allowed.
 */
int tpurt_kernel_roll(struct tpurt_kernel *k, const char *dst,
		      const char *src, const char *shift, int axis);

/* What jnp.take_along_axis gives for an index outside the source. */
enum tpurt_gather_mode {
	TPURT_GATHER_FILL = 0,		/* mode="fill", jnp's default */
	TPURT_GATHER_PROMISE_IN_BOUNDS = 1,	/* the job fails instead */
};

/*
 * dst[...] = jnp.take_along_axis(src[...], indices[...], @axis, mode=):
 * @indices an int32 ref of dst's shape with src's rows (@axis 1) or
 * columns (@axis 0). TPURT_GATHER_FILL: indices in [-n, 0) count from
 * the end, others outside give @fill converted to dst's dtype, NaN (jnp's
 * default, in every dtype its "invalid" value: INT32_MIN, 255 for uint8,
 * true for bool) if @fill is NULL; TPURT_GATHER_PROMISE_IN_BOUNDS: an
 * index outside [0, n) fails the job.
 */
int tpurt_kernel_gather(struct tpurt_kernel *k, const char *dst,
			const char *src, const char *indices, int axis,
			enum tpurt_gather_mode mode, const float *fill);

/*
 * pltpu.prng_seed(seeds[0], ...): key the core's PRNG with @n (1 to 4)
 * scalar expressions (index-map text: program ids, SMEM loads,
 * constants), each taken as int32, restarting its draws. The state is per
 * core and lives across the core's grid steps.
 */
int tpurt_kernel_prng_seed(struct tpurt_kernel *k, int n,
			   const char *const *seeds);

/*
 * pltpu.delay(nanos): the core stalls @nanos (1 to 10^9) nanoseconds in
 * the timing model (the step's modeled time grows by them); nothing else
 * changes, and the device does not wait in host time.
 */
int tpurt_kernel_delay(struct tpurt_kernel *k, int64_t nanos);

/*
 * dst[...] = pltpu.prng_random_bits(dst's shape): 32 random bits per
 * element of an int32 or uint32 @dst (the bits are the same), the next
 * draw of the core's PRNG. Philox-4x32-10 of the seeds
 * and the draw: deterministic, not a TPU's hardware bits.
 */
int tpurt_kernel_prng_random_bits(struct tpurt_kernel *k, const char *dst);

/* What one {} of a pl.debug_print shows. */
enum tpurt_print_kind {
	TPURT_PRINT_INT = 0,	/* a scalar-core expression, a signed integer */
	TPURT_PRINT_BOOL = 1,	/* a scalar-core expression, True or False */
	TPURT_PRINT_REF = 2,	/* a VMEM ref's elements: one as a number,
				 * more as a NumPy-style array */
};

struct tpurt_print_arg {
	enum tpurt_print_kind kind;
	const char *text;	/* index-map text, or a ref (window) name */
};

/*
 * pl.debug_print(@fmt, *args): each time the op runs (under the open
 * when() blocks, at every loop trip), the device records the format's
 * number and the @nargs values (at most 8 scalar-core ones and 3 refs);
 * after the job the runtime writes @fmt with each {} replaced by its
 * argument, in order ({{ and }} are braces), as one line to the device's
 * print stream (tpurt_device_set_print_stream). -EINVAL if @fmt's {}
 * are not @nargs, or it has other fields ({0}, {:x}).
 */
int tpurt_kernel_debug_print(struct tpurt_kernel *k, const char *fmt,
			     int nargs, const struct tpurt_print_arg *args);

/*
 * --- The memory model: async copies, semaphores, SMEM stores, scopes ---
 *
 * A ref string may be a window of a ref, as Pallas's ref.at[...] writes
 * it: "buf.at[slot]", "k_hbm.at[h, page]", "x.at[pl.ds(i * 128, 128), :]",
 * "buf.at[0, 1:3]". Each index is an expression in the index-map syntax
 * (grid index names, program_id, num_programs, scalar-prefetch reads
 * "page_table[b * 8 + i]", SMEM scratch reads "slot_ref[0]",
 * semaphore_read(sem.at[i])) that drops its dimension; pl.ds(start, size)
 * (or ds) slices @size elements from @start; "a:b" (constants) and ":"
 * slice too; dimensions left out are whole. A squeezed block dimension is
 * not indexed. Async copies take any window of any ref (an operand in
 * TPURT_ANY is its whole HBM array); the compute ops above take windows
 * of VMEM refs that are contiguous (leading indices and/or a pl.ds on the
 * first sliced dimension, the rest whole). A semaphore is named
 * "sem.at[i]" or "sem" (element 0). Checked by pallas_call.
 */

/* pltpu.make_async_copy(src, dst, sem).start(): the copy runs on the
 * DMA engine and signals @sem with its bytes when done. */
int tpurt_kernel_copy_start(struct tpurt_kernel *k, const char *src,
			    const char *dst, const char *sem);
/* .wait() of that copy: waits until @sem holds @dst's bytes and takes them. */
int tpurt_kernel_copy_wait(struct tpurt_kernel *k, const char *src,
			   const char *dst, const char *sem);
/* pltpu.sync_copy(src, dst): start and wait, on a DMA semaphore that
 * pallas_call adds to the job. */
int tpurt_kernel_sync_copy(struct tpurt_kernel *k, const char *src,
			   const char *dst);
/* pltpu.semaphore_signal(sem, amount), pltpu.semaphore_wait(sem, amount):
 * @amount an index-map expression ("1"). */
int tpurt_kernel_semaphore_signal(struct tpurt_kernel *k, const char *sem,
				  const char *amount);
int tpurt_kernel_semaphore_wait(struct tpurt_kernel *k, const char *sem,
				const char *amount);
/*
 * dst = value for one element of an SMEM ref (SMEM scratch, a scalar
 * prefetch ref's SMEM copy, an SMEM-space output's block): @dst
 * "slot_ref[0]" (s[i, j] for a 2-D one), @value an index-map expression.
 */
int tpurt_kernel_scalar_store(struct tpurt_kernel *k, const char *dst,
			      const char *value);
/*
 * pl.run_scoped: a scratch @name (VMEM, SMEM or semaphores, as
 * tpurt_grid_spec_add_scratch takes them) that the ops added until the
 * matching tpurt_kernel_end_scoped() may name. pallas_call adds it to the
 * job's scratch; scopes that never overlap and have one type share a
 * buffer. Nests up to 4 deep.
 */
int tpurt_kernel_run_scoped(struct tpurt_kernel *k, const char *name,
			    enum tpurt_memory_space space,
			    enum tpurt_dtype dtype, int rank,
			    const int64_t *shape);
int tpurt_kernel_end_scoped(struct tpurt_kernel *k);

/*
 * A statement of a Pallas kernel body, as text (grammar in doc/libtpurt.md):
 *
 *	"acc[...] += jnp.dot(x[...], y[...].T)"
 *	"m_new = jnp.maximum(m[...], jnp.max(s, axis=1, keepdims=True))"
 *	"pl.when(pl.program_id(2) == 0): acc[...] = jnp.zeros_like(acc)"
 *
 * lowered at once to the device's ops. Refs are those @gs declares; names
 * bound by "name = expr" are local values, held in VMEM temporaries that
 * pallas_call adds to the job's scratch (counted against the VMEM limit);
 * "name = 0.125" binds a constant. Shapes, dtypes and names are checked
 * here, against @gs: pass pallas_call a grid spec with the same refs.
 * Errors name the statement (numbered from 1 in the kernel) and point at
 * the column. Statements and builder calls may be mixed. The memory
 * model's statements (windows, pltpu.make_async_copy, sync_copy,
 * semaphores, SMEM element stores) are in doc/libtpurt.md.
 */
int tpurt_kernel_stmt(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		      const char *text);
/* Each line of @text (newline-separated) as tpurt_kernel_stmt(); blank
 * lines and '#' comments are skipped, a line with brackets open goes on,
 * and "@pl.when(c)" / "@pl.run_scoped(name=type, ...)" with their
 * "def _(...):" open indented blocks. */
int tpurt_kernel_stmts(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		       const char *text);

/*
 * What @k became: its temporaries, then one line per op in the statement
 * syntax (refs as name[...], broadcasts as row(b[...]) and col(b[...]),
 * scalars the scalar core computes as scalar(expr), SMEM reads as s[expr],
 * predicates as a "when(pred): " prefix; windows as buf.at[i][...],
 * copies as make_async_copy(src, dst, sem).start() or sync_copy(src,
 * dst), semaphore_signal/wait(sem, n), SMEM stores as s[i] = v, and a
 * "scoped" line per run_scoped scratch).
 */
int tpurt_kernel_dump(const struct tpurt_kernel *k, FILE *out);

/* --- pallas_call and jobs --- */

/* Where a job failed (the device's report), for callers that want more
 * than tpurt_last_error(). */
struct tpurt_job_error {
	uint32_t code;			/* enum tpu_job_error, 0: none */
	int32_t operand;		/* ref index in Pallas order, or -1 */
	int32_t op;			/* kernel operation, or -1 */
	int64_t step;			/* row-major grid step, or -1 */
	int64_t block[TPURT_MAX_RANK];
	uint64_t need, limit;		/* bytes, for VMEM/SMEM/buffer errors */
};

/*
 * A job's statistics. Wall-clock times are the host's; modeled times are
 * the chip's (the device's timing model). The two are never mixed.
 */
struct tpurt_job_stats {
	uint64_t steps;
	uint64_t blocks_fetched;	/* input blocks copied HBM -> VMEM */
	uint64_t blocks_skipped;	/* fetches skipped: index unchanged */
	uint64_t blocks_written;	/* output blocks written back */
	uint64_t hbm_bytes_in;
	uint64_t hbm_bytes_out;
	uint64_t mxu_flops;
	uint32_t cores_used;
	uint64_t device_wall_ns;	/* host time the device ran the job */
	uint64_t call_wall_ns;		/* submit to completion, as the caller saw it */
	uint64_t model_time_ps;		/* modeled time on the chip */
	uint64_t model_mxu_busy_ps;
	uint64_t model_dma_busy_ps;
	uint64_t model_bubble_ps;
	struct tpurt_job_error error;
	uint64_t loop_trips;		/* trips of the kernel's device loops */
};

/*
 * Run @k over @gs with @args in Pallas's order: the scalar-prefetch arrays,
 * the inputs, then the outputs (allocated by the caller with the result's
 * dtype and shape). Checks block shapes as Pallas TPU does (each of the
 * last two block dims divisible by 8 and 128 respectively or equal to the
 * array's; a rank-1 block divisible by 128 or equal), dtypes, the kernel's
 * refs and shapes, and VMEM and SMEM need against their limits; builds the
 * job descriptor; runs it and waits. @stats may be NULL. Operands in
 * TPURT_ANY and TPURT_SMEM skip the (8, 128) rule (SMEM is not tiled). An output aliased to an input
 * (params->input_output_aliases) is given as that input's array or NULL;
 * an output that shares buffer bytes with another argument without such
 * a declaration is refused.
 */
int tpurt_pallas_call(const struct tpurt_kernel *k,
		      const struct tpurt_grid_spec *gs,
		      const struct tpurt_compiler_params *params,
		      struct tpurt_array *const *args, int nargs,
		      struct tpurt_job_stats *stats);

struct tpurt_job;

/* As tpurt_pallas_call(), but returns once the job is queued. */
int tpurt_pallas_call_async(const struct tpurt_kernel *k,
			    const struct tpurt_grid_spec *gs,
			    const struct tpurt_compiler_params *params,
			    struct tpurt_array *const *args, int nargs,
			    struct tpurt_job **jobp);
/* Wait for @job; 0, or -EIO/-ETIMEDOUT/-ECANCELED with the reason. */
int tpurt_job_wait(struct tpurt_job *job, struct tpurt_job_stats *stats);
/* The syncobj signalled when @job completes (0 for an in-process device,
 * whose jobs complete before tpurt_pallas_call_async() returns). */
uint32_t tpurt_job_syncobj(const struct tpurt_job *job);
/* Wait if not yet waited for, and free. NULL is ignored. */
void tpurt_job_free(struct tpurt_job *job);

/*
 * The job descriptor pallas_call would submit (uapi/tpu_job.h), after the
 * same checks; malloc'd, the caller frees it.
 */
int tpurt_pallas_call_build(const struct tpurt_kernel *k,
			    const struct tpurt_grid_spec *gs,
			    const struct tpurt_compiler_params *params,
			    struct tpurt_array *const *args, int nargs,
			    void **descp, size_t *lenp);

/* --- Ready-made ops: the guide's templated matmul --- */

enum tpurt_activation {
	TPURT_ACT_IDENTITY = TPURT_IDENTITY,
	TPURT_ACT_RELU = TPURT_RELU,
	TPURT_ACT_GELU = TPURT_GELU,
	TPURT_ACT_SILU = TPURT_SILU,
	TPURT_ACT_SIGMOID = TPURT_SIGMOID,
	TPURT_ACT_TANH = TPURT_TANH,
};

/*
 * An elementwise op on an input block after it lands in VMEM and before
 * the dot (Pallas's allow_input_fusion): block = op(fn(block), operand),
 * computed into a VMEM scratch of @dtype that the dot reads.
 */
enum tpurt_fusion_operand {
	TPURT_FUSE_NONE = 0,		/* only fn */
	TPURT_FUSE_SCALAR = 1,		/* op(block, @scalar) */
	TPURT_FUSE_COLUMNS = 2,		/* op(block, @columns[col]): per column */
};

struct tpurt_input_fusion {
	int enabled;
	enum tpurt_dtype dtype;		/* the block fed to the dot: f32 or bf16 */
	enum tpurt_unary fn;		/* first */
	enum tpurt_binary op;		/* then, with the operand */
	enum tpurt_fusion_operand operand;
	float scalar;
	struct tpurt_array *columns;	/* rank 1, one per column of the input */
};

/*
 * Options of tpurt_matmul(); a zeroed struct (or NULL) is the guide's plain
 * kernel with the runtime's block sizes. transpose_lhs/transpose_rhs
 * transpose the array given; a transpose view as x or y does the same, and
 * the two cancel.
 */
struct tpurt_matmul_opts {
	int64_t bm, bk, bn;		/* 0: chosen by the runtime */
	int transpose_lhs;		/* x given is (k, m): x.T @ y */
	int transpose_rhs;		/* y given is (n, k): x @ y.T */
	enum tpurt_activation activation;	/* at the last k step, before the cast */
	struct tpurt_array *bias;	/* NULL, or (n,): added before the activation */
	float out_scale;		/* 0: none; else acc * scale before bias */
	struct tpurt_input_fusion x_fusion, y_fusion;
	uint64_t vmem_limit_bytes;	/* 0: the device's default limit */
	unsigned int flags;		/* TPURT_DEBUG */
	uint32_t timeout_ms;		/* 0: the driver's default (10 s) */
};

/*
 * out = activation(scale * (x @ y) + bias).astype(out.dtype), on a grid
 * (m/bm, n/bn, k/bk) marked (parallel, parallel, arbitrary), accumulating
 * in an f32 VMEM scratch (int32 for int8/uint8 inputs) as the guide's
 * reference kernel does. Edge blocks are allowed (grid = cdiv).
 */
int tpurt_matmul(struct tpurt_array *x, struct tpurt_array *y,
		 struct tpurt_array *out, const struct tpurt_matmul_opts *opts,
		 struct tpurt_job_stats *stats);

/* The jobs of one tpurt_matmul_vjp(); a job not run has zeroed stats. */
struct tpurt_vjp_stats {
	struct tpurt_job_stats recompute;	/* the pre-activation, when not saved */
	struct tpurt_job_stats dx, dy;
};

/*
 * The backward pass of tpurt_matmul() (the guide's custom_vjp): for
 * z = act(s * (x @ y) + bias), given the cotangent @dz of z, with
 * g = dz * act'(pre) and pre = s * (x @ y) + bias:
 *
 *	dx = s * (g @ y.T)	(m, k), through the transpose_rhs path
 *	dy = s * (x.T @ g)	(k, n), through the transposed-LHS path
 *
 * @x, @y and @opts are the forward call's (transposes, transpose views,
 * activation, bias, out_scale; block sizes map onto each product's dims:
 * dx's blocks are (bm, bn, bk), dy's (bk, bm, bn)). Neither y.T nor x.T is
 * materialised; g is never written to HBM: act'(pre) and the product with
 * dz are fused into the dz block after it lands in VMEM, computed from
 * device ops alone (relu: a 0/1 mask from saturating multiplies; sigmoid
 * s(1-s); tanh 1-t^2; silu s(1 + x(1-s)); gelu's tanh form, exactly
 * differentiated). @pre, the saved pre-activation (m, n) f32 or bf16, may
 * be NULL: with an activation it is then recomputed by one forward matmul
 * into a temporary f32 array (stats->recompute). Identity needs no pre.
 * @dz is (m, n) f32 or bf16; g takes the dtype of the operand it is
 * multiplied with. @dx or @dy may be NULL to skip it; neither may be a
 * transposed view. The bias gradient (column sums of g) is not computed.
 * @stats may be NULL.
 *
 * Errors: -EINVAL for shapes, dtypes (8-bit inputs have no gradient here)
 * or views as above; -EOPNOTSUPP for input fusions in @opts; those of
 * tpurt_matmul().
 */
int tpurt_matmul_vjp(struct tpurt_array *x, struct tpurt_array *y,
		     struct tpurt_array *dz, struct tpurt_array *pre,
		     struct tpurt_array *dx, struct tpurt_array *dy,
		     const struct tpurt_matmul_opts *opts,
		     struct tpurt_vjp_stats *stats);

/* --- Analysis: the guide's performance model --- */

uint64_t tpurt_matmul_flops(uint64_t m, uint64_t k, uint64_t n);	/* 2mkn */
/* (m*k + k*n + m*n) * itemsize: each operand moved once */
uint64_t tpurt_matmul_min_bytes(uint64_t m, uint64_t k, uint64_t n,
				enum tpurt_dtype dtype);
double tpurt_matmul_intensity(uint64_t m, uint64_t k, uint64_t n,
			      enum tpurt_dtype dtype);
/* (m*k*n/bn + k*n*m/bm + m*n) * itemsize: what a blocked kernel moves */
uint64_t tpurt_matmul_block_bytes(uint64_t m, uint64_t k, uint64_t n,
				  uint64_t bm, uint64_t bk, uint64_t bn,
				  enum tpurt_dtype dtype);
/* One core's peak FLOP/s (OP/s for 8-bit) with @dtype inputs. */
double tpurt_device_peak(const struct tpurt_device_info *info,
			 enum tpurt_dtype dtype);
/* The chip's ridge point: peak / HBM bandwidth, in FLOPs per byte. */
double tpurt_device_ridge(const struct tpurt_device_info *info,
			  enum tpurt_dtype dtype);
/* The whole device's peak: its cores times tpurt_device_peak(). */
double tpurt_device_total_peak(const struct tpurt_device_info *info,
			       enum tpurt_dtype dtype);
/*
 * Modeled utilization in percent: @flops done in @model_time_s of modeled
 * time, of the whole device's peak (every core's), so a job that keeps
 * every core busy reads at most 100. 0 for a time or peak of 0.
 */
double tpurt_model_utilization(const struct tpurt_device_info *info,
			       enum tpurt_dtype dtype, double flops,
			       double model_time_s);

struct tpurt_matmul_analysis {
	uint64_t flops;
	uint64_t min_bytes;
	double intensity;		/* flops / min_bytes */
	uint64_t block_bytes;		/* with the blocks given */
	double block_intensity;		/* flops / block_bytes */
	double ridge;			/* the chip's FLOPs per byte */
	int compute_bound;		/* block_intensity >= ridge */
	uint64_t vmem_bytes;		/* double-buffered blocks + accumulator */
	double est_time_s;		/* the runtime's estimate of modeled time */
};

/*
 * Analyse an (m, k) @ (k, n) matmul with @dtype inputs and blocks (bm, bk,
 * bn) on the chip @info describes. Blocks of 0 mean the whole dimension.
 */
int tpurt_matmul_analyze(const struct tpurt_device_info *info, uint64_t m,
			 uint64_t k, uint64_t n, uint64_t bm, uint64_t bk,
			 uint64_t bn, enum tpurt_dtype dtype,
			 struct tpurt_matmul_analysis *out);
/*
 * The block sizes tpurt_matmul() picks when given none: a sweep over the
 * whole dimension and MXU multiples that are powers of two or divide it,
 * keeping those within @vmem_limit (0: the device's), fastest by the
 * estimate. -ENOSPC if none fits.
 */
int tpurt_matmul_choose_blocks(const struct tpurt_device_info *info,
			       uint64_t m, uint64_t k, uint64_t n,
			       enum tpurt_dtype dtype, uint64_t vmem_limit,
			       int64_t blocks[3]);

/* --- Schedule: which block moves at each step --- */

struct tpurt_schedule_counts {
	uint64_t steps;
	uint64_t blocks_fetched;
	uint64_t blocks_skipped;
	uint64_t blocks_written;
};

/*
 * Walk @gs's grid in row-major order on one core, as the device does, and
 * print to @out (may be NULL) one line per step: the grid index, and per
 * operand its block index and "fetch", "skip" (index unchanged) or, for
 * outputs, "write" when the block is written back after the step. Scalar
 * prefetch values are read from @args (Pallas order, as for pallas_call),
 * laid out back to back as in the device's SMEM: a read past one array's
 * end reads the next, past the last it fails (-ERANGE).
 * @max_lines bounds the lines printed (0: all); @counts may be NULL.
 */
int tpurt_schedule_dump(const struct tpurt_grid_spec *gs,
			struct tpurt_array *const *args, int nargs,
			FILE *out, uint64_t max_lines,
			struct tpurt_schedule_counts *counts);
/*
 * The same, and under each printed step one line per async copy @k starts
 * there, "    copy x_hbm[8:16, 0:128] -> buf[1, 0:8, 0:128] on sem[1]"
 * (an indexed dimension shows its index), from the job pallas_call would
 * run with these arguments (all of them, checked as pallas_call does).
 * Predicates, window starts and scalar stores run on the device's scalar
 * core on the host, so slots kept in SMEM scratch are followed;
 * semaphore counts read 0.
 */
int tpurt_schedule_dump_kernel(const struct tpurt_kernel *k,
			       const struct tpurt_grid_spec *gs,
			       const struct tpurt_compiler_params *params,
			       struct tpurt_array *const *args, int nargs,
			       FILE *out, uint64_t max_lines,
			       struct tpurt_schedule_counts *counts);

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
 * TPURT_PATH_URING is asked for and the kernel cannot do it, or if @dev has
 * no queues (the in-process device).
 */
int tpurt_device_set_submit_path(struct tpurt_device *dev,
				 enum tpurt_submit_path path);
/*
 * Where the lines of kernels' debug prints go (NULL: stderr, the
 * default), written after each job that printed, in the grid's step
 * order, with a line saying how many records were dropped if the print
 * buffer filled.
 */
void tpurt_device_set_print_stream(struct tpurt_device *dev, FILE *out);
/*
 * The print buffer's size for @dev's jobs from now on, in bytes (0: the
 * default, $TPURT_PRINT_BUFFER or 1 MiB). -EINVAL below 64 bytes.
 */
int tpurt_device_set_print_buffer(struct tpurt_device *dev, uint64_t bytes);

/* The path new queues of @dev take: TPURT_PATH_URING or TPURT_PATH_IOCTL;
 * TPURT_PATH_AUTO if it has none (the in-process device). */
enum tpurt_submit_path tpurt_device_submit_path(struct tpurt_device *dev);

/* Syncobjs: dependency tokens between commands, on tpurt_device_fd().
 * -EOPNOTSUPP on the in-process device. */
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
 * once. Errors: -EINVAL, -ENOMEM, those of io_uring_queue_init(), and
 * -EOPNOTSUPP on a device without queues (the in-process device, which
 * runs each job as it is submitted).
 */
int tpurt_queue_create(struct tpurt_device *dev, unsigned int entries,
		       struct tpurt_queue **qp);

/* Flags of tpurt_queue_create_flags() */
#define TPURT_QUEUE_POLL	(1u << 0)	/* reap polls the device */

/*
 * tpurt_queue_create() with @flags. TPURT_QUEUE_POLL: on the io_uring path
 * a waiting tpurt_queue_reap() polls the device's queues instead of
 * sleeping until the interrupt (IORING_SETUP_IOPOLL): the shortest round
 * trip, a CPU busy while it waits. The ioctl path ignores it.
 */
int tpurt_queue_create_flags(struct tpurt_device *dev, unsigned int entries,
			     unsigned int flags, struct tpurt_queue **qp);
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
