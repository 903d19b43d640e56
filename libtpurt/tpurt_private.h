/* SPDX-License-Identifier: MIT */
#ifndef TPURT_PRIVATE_H
#define TPURT_PRIVATE_H

#include <stdarg.h>
#include <stddef.h>

#include "tpurt.h"
#include "tpu_config.h"
/* enum tpurt_dtype is enum tpu_dtype, value for value (dtype.c asserts it):
 * its sizes, names and classes are rules/tpu_dtype.h's. */
#include "tpu_dtype.h"
#include "tpu_job.h"
#include "tpu_print.h"

struct tpurt_job;
struct tpurt_trace;
struct tpurt_print_job;

/*
 * A device's backend: the render node (render.c) or the in-process engine
 * (sim.c). Buffer and job calls are checked by the public functions
 * (device.c, buffer.c, job.c, queue.c) before they reach a backend.
 */
struct tpurt_backend {
	void (*close)(struct tpurt_device *dev);
	int (*info)(struct tpurt_device *dev, struct tpurt_device_info *info);
	int (*buffer_create)(struct tpurt_buffer *buf);
	void (*buffer_free)(struct tpurt_buffer *buf);
	int (*buffer_write)(struct tpurt_buffer *buf, uint64_t offset,
			    const void *src, uint64_t len);
	int (*buffer_read)(struct tpurt_buffer *buf, uint64_t offset,
			   void *dst, uint64_t len);
	int (*buffer_copy)(struct tpurt_buffer *dst, uint64_t dst_offset,
			   struct tpurt_buffer *src, uint64_t src_offset,
			   uint64_t len);
	void *(*buffer_map)(struct tpurt_buffer *buf);
	/* Queue @desc with @bufs as its buffer table; fills job->id etc. */
	int (*job_submit)(struct tpurt_job *job, const void *desc, size_t len,
			  struct tpurt_buffer *const *bufs, unsigned int nbufs);
	/* Wait; fill job->report and job->status. */
	int (*job_wait)(struct tpurt_job *job);
	/*
	 * Queues (queue.c) run on the render node's io_uring commands or
	 * ioctls with syncobjs. The path queues take for @want
	 * (TPURT_PATH_AUTO: the best the device has), or a failure saying
	 * why the device has no such path.
	 */
	int (*submit_path)(struct tpurt_device *dev, enum tpurt_submit_path want,
			   enum tpurt_submit_path *path);
	int (*sync_create)(struct tpurt_device *dev, uint32_t *syncp);
	void (*sync_destroy)(struct tpurt_device *dev, uint32_t sync);
};

struct tpurt_device {
	const struct tpurt_backend *ops;
	int fd;			/* render node, or -1 */
	char node[64];
	void *sim;		/* sim.c's state */
	int have_info;
	struct tpurt_device_info info;	/* cached by tpurt_device_cached_info */
	int submit_path;	/* enum tpurt_submit_path; AUTO until probed */
	struct tpurt_trace *trace;	/* TPURT_TRACE's file, or NULL */
	int trace_off;		/* TPURT_TRACE was unset at the first job */
	FILE *print_out;	/* debug prints' lines; NULL: stderr */
	uint64_t print_bytes;	/* print buffer size; 0: the default */
};

struct tpurt_buffer {
	struct tpurt_device *dev;
	uint32_t handle;
	uint64_t size;		/* as asked for */
	uint64_t alloc_size;	/* page-rounded, as allocated */
	uint64_t mmap_offset;	/* render node */
	uint64_t hbm_offset;	/* in-process device */
	void *map;		/* lazily mmapped, or NULL */
};

struct tpurt_array {
	struct tpurt_buffer *buf;
	enum tpurt_dtype dtype;
	int rank;
	int64_t shape[TPURT_MAX_RANK];
	uint64_t size;		/* elements */
	/*
	 * A view borrows @base's buffer (NULL: the array owns it). Its
	 * shape is logical; @transposed says the elements lie in @base's
	 * layout, the shape reversed (a view of a view is not transposed).
	 */
	const struct tpurt_array *base;
	int transposed;
};

/* The array whose buffer holds @a's elements, and whether @a reads them
 * transposed (a transpose view). */
const struct tpurt_array *tpurt_array_physical(const struct tpurt_array *a,
					       int *transposed);

#define TPURT_NAME_MAX	32
#define TPURT_TEXT_MAX_	192		/* a ref, a window or an expression */

struct tpurt_job {
	struct tpurt_device *dev;
	uint32_t timeout_ms;	/* run-time limit on the device, 0: default */
	uint64_t id;
	uint32_t syncobj;
	int waited;
	int status;		/* 0, -EIO, -ETIMEDOUT, -ECANCELED */
	uint64_t submit_ns;
	uint64_t done_ns;
	struct tpu_job_report report;
	struct tpurt_buffer *trace_buf;	/* TPURT_TRACE: the device fills it */
	struct tpurt_print_job *print;	/* the kernel's debug prints, or NULL */
	/* for messages: the operands in Pallas order, then from
	 * TPU_JOB_MAX_OPERANDS on the job's scratch */
	unsigned int nrefs, nscratch;
	char names[TPU_JOB_MAX_OPERANDS + TPU_JOB_MAX_SCRATCH][TPURT_NAME_MAX];
};

/* Record a message for tpurt_last_error() and return @err (negative). */
int tpurt_fail(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int tpurt_vfail(int err, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* The first render node whose driver is tpu (render.c). */
int tpurt_render_open_first(struct tpurt_device **devp);

struct io_uring;
struct io_uring_sqe;

/*
 * An IORING_OP_URING_CMD SQE (128 bytes, SQE128 rings) carrying @size bytes
 * of @args for the render node @fd; NULL when the ring is full.
 */
struct io_uring_sqe *tpurt_uring_prep_cmd(struct io_uring *ring, int fd,
					  uint32_t op, const void *args,
					  size_t size, uint64_t user_data);

uint64_t tpurt_now_ns(void);

/* The device's info, read once. */
int tpurt_device_cached_info(struct tpurt_device *dev,
			     const struct tpurt_device_info **infop);

/*
 * The device's parameters as the device's rules take them (rules/: the job
 * decoder, the timing model), from its info (device_config.c).
 */
void tpurt_device_config(const struct tpurt_device_info *info,
			 struct tpu_config *cfg);

/* --- TPURT_TRACE (trace.c) --- */

/*
 * Submit @desc with @bufs as its buffer table through the device's backend;
 * with TPURT_TRACE set, with TPU_JOB_F_TRACE and a trace buffer in one
 * more slot (the file is created on the device's first job).
 */
int tpurt_job_submit(struct tpurt_job *job, const void *desc, size_t len,
		     struct tpurt_buffer *const *bufs, unsigned int nbufs);
/* After the device's wait: append @job's trace to the file, free its buffer. */
void tpurt_trace_job_done(struct tpurt_job *job);

/* pl.debug_print (print.c): @fmt's {} fields are @nargs, and no others. */
int tpurt_print_check_format(const char *fmt, int nargs);
/* A print buffer and @k's formats for a job of @k (NULL: no prints). */
int tpurt_print_job_new(struct tpurt_device *dev, const struct tpurt_kernel *k,
			struct tpurt_print_job **pjp);
struct tpurt_buffer *tpurt_print_job_buffer(const struct tpurt_print_job *pj);
/* After the job: its records as lines on the device's print stream. */
void tpurt_print_job_done(struct tpurt_job *job);
void tpurt_print_job_free(struct tpurt_print_job *pj);
/* Finish the file (tpurt_close). NULL: nothing. */
void tpurt_trace_close(struct tpurt_trace *t);

/* --- job descriptors (jobdesc.c) --- */

struct tpurt_desc {
	struct tpu_job_header h;
	struct tpu_job_operand operand[TPU_JOB_MAX_OPERANDS];
	struct tpu_job_scratch scratch[TPU_JOB_MAX_SCRATCH];
	struct tpu_job_op op[TPU_JOB_MAX_OPS];
	struct tpu_job_insn insn[TPU_JOB_MAX_INSNS];
	struct tpu_job_window window[TPU_JOB_MAX_WINDOWS];
};

/* Append @prog to the code array; -E2BIG past TPU_JOB_MAX_INSNS. */
int tpurt_desc_add_program(struct tpurt_desc *d, const struct tpurt_program *prog,
			   struct tpu_job_prog *out);
/* Lay out the blob: malloc'd into *blobp, its length in *lenp. */
int tpurt_desc_finish(struct tpurt_desc *d, void **blobp, size_t *lenp);

/* --- Pallas internals shared by pallas_call, schedule and matmul --- */

/* One compiled index map, with its text for messages. */
struct tpurt_operand_spec {
	char name[TPURT_NAME_MAX];
	int role;				/* enum tpu_operand_role */
	/* index_map points at map_text; for TPURT_ANY the shape, if any,
	 * is the array's */
	struct tpurt_block_spec spec;
	int has_dtype;				/* tpurt_grid_spec_set_dtype() */
	enum tpurt_dtype dtype;
	/* scalar prefetch: the shape declared, for s[i, j] (rank 0: 1-D) */
	int prefetch_rank;
	int64_t prefetch_shape[2];
	char map_text[256];
	struct tpurt_program map;
};

struct tpurt_scratch_spec {
	char name[TPURT_NAME_MAX];
	enum tpurt_memory_space space;
	enum tpurt_dtype dtype;
	int rank;
	int64_t shape[TPURT_MAX_RANK];
};

struct tpurt_grid_spec {
	int rank;
	int64_t grid[TPURT_MAX_RANK];
	char index_names[128];
	int num_prefetch, num_inputs, num_outputs, num_scratch;
	/* prefetch, inputs, outputs in Pallas order (outputs after inputs) */
	struct tpurt_operand_spec operand[TPU_JOB_MAX_OPERANDS];
	int num_operands;
	struct tpurt_scratch_spec scratch[TPU_JOB_MAX_SCRATCH];
	const char *prefetch_names[TPU_JOB_MAX_OPERANDS];
	int64_t prefetch_cols[TPU_JOB_MAX_OPERANDS];	/* 2-D: row length */
};

/* Compile @text expecting @nresults values (-1: any); @what for messages. */
int tpurt_index_map_compile_as(const char *text,
			       const struct tpurt_index_map_env *env,
			       int nresults, const char *what,
			       struct tpurt_program *prog);

/*
 * Kernel-body programs (predicates, scalars, window starts) may also read
 * SMEM refs by name, name[i] or name[i, j] (SMEM scratch and SMEM-space
 * operands' blocks), and semaphores, semaphore_read(sem.at[i]): each
 * readable name with the instruction that loads it.
 */
/*
 * An N-D semaphore scratch (SemaphoreType.DMA((2, 3))) is, for the device,
 * a flat array of the product of its dimensions, indexed row-major: the
 * device keeps one count per element and needs no shape.
 */
static inline int64_t tpurt_semaphore_count(int rank, const int64_t *shape)
{
	int64_t n = 1;

	for (int d = 0; d < rank; d++) {
		if (shape[d] < 1)
			return shape[d];
		n = n > TPU_JOB_MAX_SEMAPHORES ? n : n * shape[d];
	}
	return n;
}

static inline int tpurt_semaphore_count_ok(int rank, const int64_t *shape)
{
	int64_t n = tpurt_semaphore_count(rank, shape);

	return n >= 1 && n <= TPU_JOB_MAX_SEMAPHORES;
}

struct tpurt_body_name {
	const char *name;
	uint8_t insn;			/* TPU_INSN_LOAD_SMEM or _LOAD_SCRATCH */
	int32_t arg;			/* operand or job scratch index */
	int64_t cols;			/* 2-D: its row length, else 0 */
	int semaphore;			/* read by semaphore_read() only */
	int rank;			/* a semaphore's dimensions */
	int64_t extent[TPU_JOB_MAX_RANK];
};

struct tpurt_body_names {
	const struct tpurt_body_name *name;
	int n;
};

int tpurt_body_program_compile(const char *text,
			       const struct tpurt_index_map_env *env,
			       const struct tpurt_body_names *names,
			       int nresults, const char *what,
			       struct tpurt_program *prog);

/*
 * Ref text (window.c): "name" or a window "name.at[i, pl.ds(s, n), :]".
 * Each index is an index-map expression (TPURT_IX_INDEX, dropping its
 * dimension), a slice of @size from @start, or the whole dimension.
 */
enum tpurt_index_kind { TPURT_IX_INDEX, TPURT_IX_SLICE, TPURT_IX_WHOLE };

struct tpurt_index {
	enum tpurt_index_kind kind;
	char start[TPURT_TEXT_MAX_];
	int64_t size;
	int64_t stride;			/* pl.ds(start, size, stride); 0: 1 */
};

struct tpurt_ref_text {
	char base[TPURT_NAME_MAX];
	int windowed;			/* written with .at[...] */
	int nidx;
	struct tpurt_index idx[TPU_JOB_MAX_RANK];
};

/* Parse @text; a failure's message names @what and the text. */
int tpurt_ref_parse(const char *text, const char *what, struct tpurt_ref_text *r);

/* A window fitted onto its base ref. */
struct tpurt_window_fit {
	uint8_t squeeze;			/* bit d: dimension d indexed */
	uint32_t size[TPU_JOB_MAX_RANK];
	char starts[4 * TPURT_TEXT_MAX_];	/* "s0, s1, ...": one per dim */
	int all_zero;				/* every start is 0 */
	int ndims;				/* unsqueezed */
	uint8_t stride[TPU_JOB_MAX_RANK];	/* 0: unit; copies take others */
	int64_t shape[TPU_JOB_MAX_RANK];	/* unsqueezed sizes */
	int contiguous;				/* a body op may take it */
	int64_t rows, cols;			/* as a 2-D ref */
};

/*
 * Fit @r onto a base of @rank dimensions of @extent; the dimensions in
 * @hidden (squeezed block dimensions) are not indexed by the text. A
 * constant start outside the base is an error unless the window is
 * @predicated (under pl.when: the device checks it if the op runs, as a
 * loop unrolled to a bound it may not reach writes).
 */
int tpurt_window_fit(const struct tpurt_ref_text *r, const char *what,
		     int rank, const int64_t *extent, unsigned int hidden,
		     int predicated, struct tpurt_window_fit *w);

/* A kernel operation as the builder recorded it: refs and predicates stay
 * text until pallas_call resolves them against a grid spec. */
#define TPURT_WHEN_DEPTH	4
#define TPURT_TEXT_MAX		TPURT_TEXT_MAX_

/*
 * Refs are names or windows ("buf.at[slot]"); a copy's semaphore is src1
 * ("sem.at[slot]"); a scalar store's dst is "ref[index]".
 */
struct tpurt_kernel_op {
	uint8_t opcode, fn, bcast, dot;		/* as in struct tpu_job_op */
	uint8_t axis, bcast2;
	char dst[TPURT_TEXT_MAX], src0[TPURT_TEXT_MAX], src1[TPURT_TEXT_MAX];
	char src2[TPURT_TEXT_MAX];
	/* TPU_BCAST_SMEM's index, TPU_BCAST_SCALAR's value, IOTA's offset,
	 * a semaphore op's amount, a scalar store's value */
	char scalar[TPURT_TEXT_MAX];
	float imm, imm2;			/* TPU_BCAST_IMM, clamp's bounds */
	int npred;
	char pred[TPURT_WHEN_DEPTH][TPURT_TEXT_MAX];
	int body;				/* TPU_OP_LOOP: ops in its body */
	int print;				/* TPU_OP_DEBUG_PRINT: its format */
	uint32_t max_trips;			/* a while loop's, or 0 */
	uint32_t delay_ns;			/* TPU_OP_DELAY's stall */
};

/*
 * A VMEM temporary of statements (a local value or an intermediate),
 * appended to the job's scratch by pallas_call. Rank 2, as the body sees
 * every ref.
 */
#define TPURT_KERNEL_MAX_TEMPS	64	/* they share the job's scratch slots */

struct tpurt_kernel_temp {
	char name[TPURT_NAME_MAX];
	enum tpurt_dtype dtype;
	int64_t rows, cols;
	/* rank 3 or 4: the shape a strided copy fills (the body sees rows x
	 * cols, as of any scratch); 0: rows x cols */
	int rank;
	int64_t shape[TPU_JOB_MAX_RANK];
	int bound;			/* holds a statement variable */
	int busy;			/* holds an intermediate being lowered */
};

/* A name bound by a statement: a value in a temporary, an input's block
 * (read-only, so no copy), a constant or a scalar-core expression. */
#define TPURT_KERNEL_MAX_LOCALS	128

enum tpurt_local_kind {
	TPURT_LOCAL_TEMP,		/* temp[] holds it */
	TPURT_LOCAL_INPUT,		/* the input ref @ref, read whole */
	TPURT_LOCAL_CONST,		/* @value */
	TPURT_LOCAL_SCALAR,		/* @text, index-map syntax */
	TPURT_LOCAL_COPY,		/* make_async_copy(@ref, @dst, @sem) */
};

struct tpurt_kernel_local {
	char name[TPURT_NAME_MAX];
	enum tpurt_local_kind kind;
	int temp;
	char ref[TPURT_TEXT_MAX];	/* an input, a window; a copy's src */
	char dst[TPURT_TEXT_MAX];	/* a copy descriptor's */
	char sem[TPURT_TEXT_MAX];
	/* a scalar reading SMEM or a semaphore that statement @stale
	 * changed after it was bound (Python would read the old value) */
	int stale;
	char stale_ref[TPURT_NAME_MAX];
	double value;
	int is_int;
	char text[TPURT_TEXT_MAX];
};

/*
 * A pl.run_scoped scratch: ops [first, end) may name it. The hidden DMA
 * semaphore of sync copies (TPURT_SYNC_SEM) spans the whole kernel.
 */
#define TPURT_KERNEL_MAX_SCOPES	64
#define TPURT_SCOPE_DEPTH	32
#define TPURT_SYNC_SEM		"%sync"

struct tpurt_kernel_scope {
	char name[TPURT_NAME_MAX];
	enum tpurt_memory_space space;
	enum tpurt_dtype dtype;
	int rank;
	int64_t shape[TPURT_MAX_RANK];
	int first, end;			/* end: -1 while open */
};

/*
 * A kernel. Its operations come last: a statement only appends to them
 * (ops below nops never change), so rolling a failed statement back
 * restores the TPURT_KERNEL_STATE_SIZE bytes before op[] (nops with them)
 * and not the op array, which is most of the struct (TPU_JOB_MAX_OPS
 * entries of five refs and four predicates).
 */
/*
 * A pl.debug_print's format: the device records its number and values,
 * the runtime keeps the string and each {}'s argument: a scalar-core
 * value (the record's scalar @slot) or a ref's elements (ref @slot).
 */
#define TPURT_KERNEL_MAX_PRINTS	64
#define TPURT_PRINT_FMT_MAX	256
#define TPURT_PRINT_MAX_ARGS	(TPU_PRINT_MAX_SCALARS + TPU_PRINT_MAX_REFS)

struct tpurt_kernel_print {
	char fmt[TPURT_PRINT_FMT_MAX];
	int nargs;
	uint8_t kind[TPURT_PRINT_MAX_ARGS];	/* enum tpurt_print_kind */
	uint8_t slot[TPURT_PRINT_MAX_ARGS];
};

struct tpurt_kernel {
	int nops;
	struct tpurt_kernel_print print[TPURT_KERNEL_MAX_PRINTS];
	int nprints;
	struct tpurt_kernel_scope scope[TPURT_KERNEL_MAX_SCOPES];
	int nscopes;
	int open[TPURT_SCOPE_DEPTH];	/* open scopes, innermost last */
	int nopen;
	char when[TPURT_WHEN_DEPTH][TPURT_TEXT_MAX];
	int nwhen;
	/* open loops, innermost last: each one's op and the when() blocks
	 * open outside it (its op's predicate; not its body's ops') */
	int loop_op[TPU_JOB_MAX_LOOP_DEPTH];
	int loop_when[TPU_JOB_MAX_LOOP_DEPTH];
	int nloops;
	struct tpurt_kernel_temp temp[TPURT_KERNEL_MAX_TEMPS];
	int ntemps;
	struct tpurt_kernel_local local[TPURT_KERNEL_MAX_LOCALS];
	int nlocals;
	int nstmts;			/* statements added, for messages */
	struct tpurt_kernel_op op[TPU_JOB_MAX_OPS];
};

#define TPURT_KERNEL_STATE_SIZE	offsetof(struct tpurt_kernel, op)

/* One life of temporary @temp: ops @first to @last, in scratch slot @slot. */
struct tpurt_temp_life {
	int temp, first, last, slot;
};

/*
 * The job's scratch slots for @k's temporaries: a temporary lives from an
 * op that gives it a whole new value to its last use before the next one
 * (loops join lives, kernel.c), and lives of one type that do not overlap
 * share a slot. *@livesp (the caller frees it) gets the *@nlivesp lives
 * with their slots, slot_temp[s] a temporary of slot s. Returns the number
 * of slots, or a negative errno.
 */
int tpurt_kernel_temp_lives(const struct tpurt_kernel *k, struct tpurt_temp_life **livesp,
			    int *nlivesp, int *slot_temp);

/* The slot of temporary @t at op @op (-1 if no life of it holds @op). */
int tpurt_kernel_temp_slot_at(const struct tpurt_temp_life *lives, int nlives, int t, int op);

/* The scope named @name (its base name) that op @n of @k may use, innermost
 * first; -1 if none. */
int tpurt_kernel_scope_at(const struct tpurt_kernel *k, int n, const char *name,
			  size_t len);

/*
 * The job's scratch slots for @k's scopes: scopes of one type whose op
 * ranges do not overlap share one. slot[s] for scope s; slot_scope[i] a
 * scope of slot i. Returns the number of slots.
 */
int tpurt_kernel_scope_slots(const struct tpurt_kernel *k, int *slot,
			     int *slot_scope);

/* Name of opcode @opcode for messages ("dot", "reduce"). */
const char *tpurt_kernel_opcode_name(unsigned int opcode);

/* The environment index maps and predicates of @gs compile in. */
void tpurt_grid_spec_env(const struct tpurt_grid_spec *gs,
			 struct tpurt_index_map_env *env);

/*
 * Run @prog on the device's scalar core (rules/tpu_scalar.c), on the host:
 * @pid the grid index, @grid the extents, @smem/@smem_len the
 * scalar-prefetch arrays, @smem_reach NULL (loads stay inside each array)
 * or how far a load from each may read on (tpu_smem_reach: @smem's arrays
 * then lie back to back in one allocation, as in the device's SMEM).
 * Leaves nresults values in @out. -EDOM on a division by zero, -ERANGE on
 * an SMEM index out of range. @prog must come from the compiler, which
 * verified it with the device's verifier.
 */
int tpurt_program_eval(const struct tpurt_program *prog, const int64_t *pid,
		       const int64_t *grid, const int32_t *const *smem,
		       const uint64_t *smem_len, const uint64_t *smem_reach,
		       int64_t *out);

struct tpu_plan;

/*
 * The job pallas_call would run (after all its checks), decoded by the
 * device's rules into @plan, with each job scratch's name as the call
 * knows it (grid spec scratch, scopes, temporaries).
 */
int tpurt_pallas_plan(const struct tpurt_kernel *k,
		      const struct tpurt_grid_spec *gs,
		      const struct tpurt_compiler_params *params,
		      struct tpurt_array *const *args, int nargs,
		      struct tpu_plan *plan,
		      char (*scratch_names)[TPURT_NAME_MAX]);

/*
 * A kernel's async copies followed step by step on the host (copy_walk.c):
 * predicates, window starts and scalar stores run on the device's scalar
 * core over a host copy of one core's SMEM.
 */
struct tpurt_copy_walk;

int tpurt_copy_walk_create(const struct tpurt_kernel *k,
			   const struct tpurt_grid_spec *gs,
			   const struct tpurt_compiler_params *params,
			   struct tpurt_array *const *args, int nargs,
			   struct tpurt_copy_walk **wp);
/* Run step @pid's ops; print a line per copy started to @out (may be NULL). */
int tpurt_copy_walk_step(struct tpurt_copy_walk *w, const int64_t *pid,
			 uint64_t step, FILE *out);
void tpurt_copy_walk_free(struct tpurt_copy_walk *w);

/* Pallas TPU's block-shape rule for operand @o over an array of @shape. */
int tpurt_check_block_shape(const struct tpurt_operand_spec *o, int rank,
			    const int64_t *shape);

/* --- matmul internals shared with the backward pass (vjp.c) --- */

/*
 * A gradient fused into one matmul input block (the cotangent dz): the dot
 * reads dz * act'(pre), computed in VMEM into a block of @dtype, where pre
 * is @pre's block at dz's block index. Identity: just dz cast to @dtype.
 */
struct tpurt_act_grad {
	enum tpurt_activation act;
	struct tpurt_array *pre;	/* NULL for identity */
	enum tpurt_dtype dtype;		/* what the dot reads */
};

/* tpurt_matmul() with a gradient fused into x (@xg) or y (@yg), or neither. */
int tpurt_matmul_fused(struct tpurt_array *x, struct tpurt_array *y,
		       struct tpurt_array *out,
		       const struct tpurt_matmul_opts *opts,
		       const struct tpurt_act_grad *xg,
		       const struct tpurt_act_grad *yg,
		       struct tpurt_job_stats *stats);

/* Emit dst = act'(pre) into kernel @k; @t and @u are f32 temporaries of
 * dst's shape (gelu uses both; sigmoid and silu @t). */
int tpurt_kernel_act_derivative(struct tpurt_kernel *k, enum tpurt_activation act,
				const char *dst, const char *pre,
				const char *t, const char *u);

/* ioctl.c: an ioctl retried on EINTR, not on EAGAIN (a queue limit). */
int tpurt_ioctl(int fd, unsigned long request, void *arg);

#endif /* TPURT_PRIVATE_H */
