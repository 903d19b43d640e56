/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * tpu job descriptor: the format userspace builds, the driver checks and the
 * device runs. Little-endian, fixed-size fields, no pointers.
 *
 * A grid job is one self-contained blob:
 *
 *   struct tpu_job_header                 at offset 0
 *   struct tpu_job_operand  [num_operands] at operands_offset
 *   struct tpu_job_scratch  [num_scratch]  at scratch_offset
 *   struct tpu_job_op       [num_ops]      at ops_offset
 *   struct tpu_job_insn     [num_insns]    at code_offset
 *   struct tpu_job_window   [num_windows]  at windows_offset
 *
 * Every array lies inside the blob (offset + count * size <= total_size),
 * is 8-byte aligned, and arrays do not overlap. Every count has a maximum
 * (TPU_JOB_MAX_*). Reserved and padding fields must be zero: a later version
 * may give them a meaning.
 *
 * Semantics follow Pallas TPU (pallas_call with a PrefetchScalarGridSpec):
 * the grid runs in row-major order; at each step the index map of each
 * operand gives the block of its HBM array that the step sees in VMEM; the
 * body, a list of micro-ops on VMEM refs, runs once per step. Operands name
 * slots of the job's buffer table, never addresses: the driver fills the
 * table from the submitter's own buffers.
 *
 * The memory model (Pallas TPU's): an operand lives in VMEM (blocked and
 * pipelined, the default), SMEM (blocked scalars) or ANY (left in HBM: no
 * automatic copies, the body moves what it needs itself). The body's async
 * copies (%TPU_OP_COPY_START, %TPU_OP_COPY_WAIT) move a window of one ref
 * to a window of another on the DMA engine while the body goes on, and
 * signal a DMA semaphore (scratch of space %TPU_MEM_SEM_DMA) with the bytes
 * they moved; a wait takes them back. Regular semaphores
 * (%TPU_MEM_SEM_REGULAR) are counters the body signals and waits on.
 * Every semaphore starts at zero on each core and must be back at zero
 * after the core's last step (Mosaic's rule), or the job fails with
 * %TPU_JOB_ERR_SEMAPHORE. Scratch, SMEM (scalar prefetch included: stores
 * change a core's own copy) and semaphores are per core and persist
 * across that core's steps.
 */
#ifndef TPU_JOB_H
#define TPU_JOB_H

#if defined(__KERNEL__) || defined(__linux__)
#include <linux/types.h>
#else
#include <stdint.h>
typedef uint8_t __u8;
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef int32_t __s32;
typedef int64_t __s64;
typedef uint64_t __u64;
#endif

/**
 * enum tpu_dtype - element types of arrays, blocks and scratch buffers
 * @TPU_DTYPE_F32: IEEE binary32
 * @TPU_DTYPE_BF16: bfloat16 (the high half of a binary32)
 * @TPU_DTYPE_INT8: signed 8-bit integer
 * @TPU_DTYPE_UINT8: unsigned 8-bit integer
 * @TPU_DTYPE_INT32: signed 32-bit integer
 * @TPU_DTYPE_BOOL: a mask element, one byte: 0 is false, anything else
 *	true; ops writing it store 0 or 1 (compare results, where's condition)
 * @TPU_DTYPE_UINT32: unsigned 32-bit integer, as XLA's u32: add, sub, mul,
 *	neg and sums wrap modulo 2^32; compares, max and min are unsigned;
 *	div and mod truncate, x / 0 is UINT32_MAX and x % 0 is x (no fault).
 *	Not scalar prefetch (whose words the scalar core reads as int32 or
 *	float32), not a dot operand
 * @TPU_DTYPE_COUNT: number of element types
 */
enum tpu_dtype {
	TPU_DTYPE_F32 = 0,
	TPU_DTYPE_BF16 = 1,
	TPU_DTYPE_INT8 = 2,
	TPU_DTYPE_UINT8 = 3,
	TPU_DTYPE_INT32 = 4,
	TPU_DTYPE_BOOL = 5,
	TPU_DTYPE_UINT32 = 6,
	TPU_DTYPE_COUNT
};

#define TPU_JOB_MAGIC		0x4a555054	/* "TPUJ" in memory order */
#define TPU_JOB_VERSION		1

#define TPU_JOB_MAX_SIZE	(1u << 20)	/* bytes in one descriptor */
#define TPU_JOB_MAX_GRID_RANK	4
#define TPU_JOB_MAX_RANK	4	/* array, block and scratch rank */
#define TPU_JOB_MAX_OPERANDS	32
#define TPU_JOB_MAX_SCRATCH	64
#define TPU_JOB_MAX_OPS		2048	/* micro-ops of the kernel body */
#define TPU_JOB_MAX_WINDOWS	256	/* all a tpu_job_ref's __u8 index names */
#define TPU_JOB_MAX_BUFFERS	8	/* pl.Buffered(n): n at most this */
#define TPU_JOB_MAX_SEMAPHORES	256	/* elements of one semaphore scratch */
#define TPU_JOB_MAX_INSNS	32768	/* whole code array, 16 an op */
#define TPU_JOB_MAX_PROG_LEN	64	/* one program */
#define TPU_JOB_MAX_STACK	16	/* scalar-core stack depth */
#define TPU_JOB_MAX_SLOTS	64	/* buffer-table slots */
#define TPU_JOB_MAX_DIM		(1u << 31)	/* grid extent, block dim */
#define TPU_JOB_MAX_ARRAY_DIM	(1ull << 40)	/* array dim */
#define TPU_JOB_MAX_STEPS	(1ull << 40)	/* product of the grid */
#define TPU_JOB_MAX_LOOP_DEPTH	4	/* %TPU_OP_LOOP nesting */
#define TPU_JOB_MAX_TRIPS	(1u << 24)	/* trips of one loop entry */
#define TPU_JOB_MAX_DELAY_NS	1000000000u	/* one %TPU_OP_DELAY's stall */

/**
 * enum tpu_job_flags - &tpu_job_header.flags
 * @TPU_JOB_F_DEBUG: debug mode, beyond Pallas: what a kernel must not read
 *	is poisoned with the values Pallas's interpret mode uses for
 *	uninitialised memory (NaN for f32 and bf16, the type's minimum for
 *	integers: INT32_MIN, -128, 0 for uint8; true for bool): scratch VMEM,
 *	every output block on its first visit, and the padding of edge input
 *	blocks (which reads as zeros otherwise); inputs are always copied; and
 *	an output block written from two different iterations of the parallel
 *	dimensions, or revisited after it was written back, fails the job with
 *	%TPU_JOB_ERR_HAZARD. Also, with async copies: a body op that reads a
 *	VMEM or SMEM region an async copy in flight writes, or writes a
 *	region one in flight reads or writes, a copy started over such a
 *	region, and a block written back or refetched while a copy in flight
 *	touches it, fail the job with %TPU_JOB_ERR_HAZARD naming the op, the
 *	copy's op and the step. (A copy's data moves when it starts; only
 *	debug mode sees a kernel that reads its destination too early.) Regions
 *	are compared as boxes of the same base ref (an ANY output and the
 *	input it aliases are one); reads by scalar-core programs are not
 *	checked.
 * @TPU_JOB_F_TRACE: the device writes the job's timeline into the buffer
 *	of slot &tpu_job_header.trace_slot, in the format of uapi/tpu_trace.h:
 *	each core's steps, DMA, MXU, vector unit and bubbles in modeled time,
 *	and the device's host wall time of each step. Results are unchanged.
 * @TPU_JOB_F_PRINT: the job's %TPU_OP_DEBUG_PRINT ops append their records
 *	to the buffer of slot &tpu_job_header.print_slot, in the format of
 *	uapi/tpu_print.h; a job with such an op must set it
 * @TPU_JOB_F_ALL: every defined flag; other bits must be zero.
 */
enum tpu_job_flags {
	TPU_JOB_F_DEBUG = 1u << 0,
	TPU_JOB_F_TRACE = 1u << 1,
	TPU_JOB_F_PRINT = 1u << 2,
	TPU_JOB_F_ALL = TPU_JOB_F_DEBUG | TPU_JOB_F_TRACE | TPU_JOB_F_PRINT,
};

/**
 * enum tpu_dim_semantics - how a grid dimension may be scheduled
 * @TPU_DIM_PARALLEL: iterations are independent; the device may split the
 *	dimension across cores.
 * @TPU_DIM_ARBITRARY: iterations run in order on one core (reductions).
 */
enum tpu_dim_semantics {
	TPU_DIM_PARALLEL = 0,
	TPU_DIM_ARBITRARY = 1,
};

/**
 * struct tpu_job_prog - a scalar-core program: a slice of the code array
 * @offset: index of its first instruction in the code array
 * @len: number of instructions; 0 means "no program" where that is allowed
 *	(an always-true predicate), at most %TPU_JOB_MAX_PROG_LEN
 * @reserved: must be zero
 */
struct tpu_job_prog {
	__u32 offset;
	__u16 len;
	__u16 reserved;
};

/**
 * struct tpu_job_header - fixed start of every job descriptor
 * @magic: %TPU_JOB_MAGIC
 * @version: %TPU_JOB_VERSION
 * @header_size: sizeof(struct tpu_job_header), so the header can grow
 * @total_size: bytes in the whole descriptor, at most %TPU_JOB_MAX_SIZE
 * @flags: &enum tpu_job_flags
 * @vmem_limit_bytes: the job's scoped VMEM limit (Pallas's
 *	CompilerParams.vmem_limit_bytes); 0 selects the device's default limit,
 *	a value above the device's physical VMEM is rejected
 * @grid_rank: number of grid dimensions, 1 to %TPU_JOB_MAX_GRID_RANK
 * @num_operands: entries in the operand array, 1 to %TPU_JOB_MAX_OPERANDS
 * @num_scalar_prefetch: how many of the first operands are scalar-prefetch
 *	operands (each of them has role %TPU_ROLE_SCALAR_PREFETCH, no other has)
 * @num_scratch: entries in the scratch array, 0 to %TPU_JOB_MAX_SCRATCH
 * @grid: extent of each grid dimension, 1 to %TPU_JOB_MAX_DIM, their
 *	product at most %TPU_JOB_MAX_STEPS; entries at and beyond @grid_rank
 *	must be zero
 * @dim_semantics: &enum tpu_dim_semantics of each grid dimension; entries at
 *	and beyond @grid_rank must be zero
 * @print_slot: with %TPU_JOB_F_PRINT, the buffer-table slot of the print
 *	buffer: at least sizeof(struct tpu_print_header) bytes (uapi/
 *	tpu_print.h), not the trace slot and no operand's slot; without it,
 *	zero
 * @reserved0: must be zero
 * @num_ops: entries in the micro-op array, 0 to %TPU_JOB_MAX_OPS (2048; a
 *	kernel body may do nothing: the pipeline still moves its blocks)
 * @num_insns: entries in the code array, 0 to %TPU_JOB_MAX_INSNS (32768,
 *	16 for each of %TPU_JOB_MAX_OPS ops: the index maps, predicates and
 *	scalar programs of a full body)
 * @operands_offset: byte offset of the &struct tpu_job_operand array
 * @scratch_offset: byte offset of the &struct tpu_job_scratch array (any
 *	aligned offset in bounds when @num_scratch is 0)
 * @ops_offset: byte offset of the &struct tpu_job_op array
 * @code_offset: byte offset of the &struct tpu_job_insn array (any aligned
 *	offset in bounds when @num_insns is 0)
 * @windows_offset: byte offset of the &struct tpu_job_window array (any
 *	aligned offset in bounds when @num_windows is 0)
 * @num_windows: entries in the window array, 0 to %TPU_JOB_MAX_WINDOWS (256,
 *	every index a &struct tpu_job_ref can name)
 * @trace_slot: with %TPU_JOB_F_TRACE, the buffer-table slot of the trace
 *	buffer: at least sizeof(struct tpu_trace_header) bytes (uapi/
 *	tpu_trace.h) and no operand's slot; without it, zero
 * @reserved2: must be zero
 */
struct tpu_job_header {
	__u32 magic;
	__u16 version;
	__u16 header_size;
	__u32 total_size;
	__u32 flags;
	__u64 vmem_limit_bytes;
	__u8 grid_rank;
	__u8 num_operands;
	__u8 num_scalar_prefetch;
	__u8 num_scratch;
	__u32 grid[TPU_JOB_MAX_GRID_RANK];
	__u8 dim_semantics[TPU_JOB_MAX_GRID_RANK];
	__u16 print_slot;
	__u16 reserved0;
	__u16 num_ops;
	__u16 num_insns;
	__u32 operands_offset;
	__u32 scratch_offset;
	__u32 ops_offset;
	__u32 code_offset;
	__u32 windows_offset;
	__u16 num_windows;
	__u16 trace_slot;
	__u32 reserved2[2];
};

/**
 * enum tpu_operand_role - what an operand is to the kernel
 * @TPU_ROLE_SCALAR_PREFETCH: an int32 array copied whole into SMEM before
 *	the first step (PrefetchScalarGridSpec's scalar prefetch); index maps,
 *	predicates and scalar broadcasts read it with %TPU_INSN_LOAD_SMEM
 * @TPU_ROLE_INPUT: an array read block by block; its VMEM blocks are
 *	read-only to the body (in space %TPU_MEM_ANY: read by async copies)
 * @TPU_ROLE_OUTPUT: an array written block by block (in space
 *	%TPU_MEM_ANY: written by async copies)
 */
enum tpu_operand_role {
	TPU_ROLE_SCALAR_PREFETCH = 0,
	TPU_ROLE_INPUT = 1,
	TPU_ROLE_OUTPUT = 2,
};

/**
 * struct tpu_job_operand - one array of the job (a pallas_call argument or
 *	result) and, for inputs and outputs, its BlockSpec
 * @slot: buffer-table slot holding the array, below %TPU_JOB_MAX_SLOTS
 * @role: &enum tpu_operand_role
 * @dtype: &enum tpu_dtype of the elements (%TPU_DTYPE_INT32 for scalar
 *	prefetch)
 * @rank: number of array (and block) dimensions, 1 to %TPU_JOB_MAX_RANK
 * @space: &enum tpu_memory_space of an input or output:
 *	%TPU_MEM_VMEM (blocks pipelined through VMEM), %TPU_MEM_SMEM (blocks
 *	pipelined through SMEM, any dtype, each element at its own size: read
 *	by %TPU_INSN_LOAD_SMEM and %TPU_BCAST_SMEM, written by
 *	%TPU_OP_SCALAR_STORE) or %TPU_MEM_ANY
 *	(no blocks: @block and @index_map are zero, and the body reaches the
 *	array in HBM only through async copies). Zero for scalar prefetch,
 *	which always lives in SMEM.
 * @offset: byte offset of element 0 inside the slot's buffer; the array is
 *	dense and row-major from there and must fit in the buffer
 * @shape: array extent of each dimension, 1 to %TPU_JOB_MAX_ARRAY_DIM;
 *	entries at and beyond @rank must be zero
 * @block: block extent of each dimension, 1 to %TPU_JOB_MAX_DIM (may exceed
 *	the array's: the rest reads as zeros); entries at and beyond @rank must
 *	be zero, and all of it for scalar prefetch
 * @index_map: program leaving @rank block indices on the stack, dimension 0
 *	deepest; block index b of dimension d covers elements
 *	[b * block[d], (b + 1) * block[d]) and must start inside the array;
 *	of an element dimension (@element_dims), elements
 *	[b - element_pad[d], b - element_pad[d] + block[d]), b from 0 and
 *	starting before the array's end. Zero length for scalar prefetch and
 *	space %TPU_MEM_ANY.
 * @buffers: pipeline_mode=pl.Buffered(n) of a VMEM-space input or output:
 *	n VMEM buffers for its blocks, 1 to %TPU_JOB_MAX_BUFFERS; 0 means the
 *	default double buffering (2). With 1 the next block's fetch cannot
 *	overlap the step using the current one; with n > 2 fetches may run up
 *	to n - 1 steps ahead. VMEM counts n blocks. Zero for other operands.
 *	An output with @revisit %TPU_REVISIT_ANY takes 1.
 * @alias: for an output, 0, or 1 + the index of the input operand whose
 *	array it is (Pallas's input_output_aliases): same slot, offset, dtype
 *	and shape; the input's data is the output's initial contents, and
 *	blocks the job never writes keep it. An input is aliased at most once.
 *	Zero for other roles. An output whose bytes overlap any other
 *	operand's without this declaration fails the job with
 *	%TPU_JOB_ERR_BUFFER (inputs may overlap each other). An aliased
 *	output's blocks are not read from HBM first: a block the job visits
 *	is written back whole, as Pallas does; with @revisit
 *	%TPU_REVISIT_ANY each visit reads it first, so the first one starts
 *	from the input's data.
 * @element_dims: bit d set: dimension d is indexed by element, not by
 *	block (pl.Element): the index map gives the element offset of the
 *	block's start, as if the array had @element_pad[d] elements of
 *	padding before it. Elements outside the array read as zeros (poison
 *	in debug mode) and are not written, as at an edge block. Bits of
 *	VMEM- and SMEM-space inputs and outputs only, below @rank.
 * @revisit: &enum tpu_revisit_mode of an output
 *	(pl.Buffered(1, revisit=...)): %TPU_REVISIT_IMMEDIATE (0) for every
 *	other operand. %TPU_REVISIT_ANY is for VMEM-space outputs with
 *	@buffers 1 (Mosaic has no double-buffered form of it) and SMEM-space
 *	outputs.
 * @element_pad: the low padding of each element dimension
 *	(pl.Element(n, (low, high))'s low; padding past the array's end needs
 *	no field: a block may overhang it), zero for other dimensions
 * @reserved2: must be zero
 *
 * In the body, an operand's VMEM block is a 2-D ref: its last block
 * dimension is the columns, the product of the others the rows.
 */
struct tpu_job_operand {
	__u32 slot;
	__u8 role;
	__u8 dtype;
	__u8 rank;
	__u8 space;
	__u64 offset;
	__u64 shape[TPU_JOB_MAX_RANK];
	__u32 block[TPU_JOB_MAX_RANK];
	struct tpu_job_prog index_map;
	__u8 buffers;
	__u8 alias;
	__u8 element_dims;
	__u8 revisit;
	__u16 element_pad[TPU_JOB_MAX_RANK];
	__u32 reserved2;
};

/**
 * enum tpu_revisit_mode - how an output's blocks may be revisited
 *	(pl.RevisitMode)
 * @TPU_REVISIT_IMMEDIATE: a block is visited on consecutive steps only: it
 *	stays in VMEM while its index repeats and is written back when the
 *	index changes; a later visit starts from the poison pattern (debug
 *	mode) or whatever the buffer held, and debug mode reports it as a
 *	hazard
 * @TPU_REVISIT_ANY: the grid may come back to a block after others: at
 *	each step where the index changes, after the old block's write-back,
 *	the new block is read from HBM into its buffer (edge blocks padded as
 *	an input's), so a visit continues from the last one's data. The first
 *	visit reads what HBM holds: the aliased input's data with
 *	&tpu_job_operand.alias, the runtime's zeros for an output it
 *	allocated. The reads are DMA the timing model counts (Buffered(1):
 *	not overlapped with compute). Visits
 *	from two iterations of the parallel dimensions still race, and debug
 *	mode still reports them
 */
enum tpu_revisit_mode {
	TPU_REVISIT_IMMEDIATE = 0,
	TPU_REVISIT_ANY = 1,
};

/**
 * enum tpu_memory_space - where an operand's blocks or a scratch live
 * @TPU_MEM_VMEM: vector memory (pltpu.VMEM), counted against the VMEM limit
 * @TPU_MEM_SMEM: scalar memory (pltpu.SMEM), counted against the SMEM size
 * @TPU_MEM_ANY: operands only: HBM, unblocked (pl.ANY, pltpu.HBM)
 * @TPU_MEM_SEM_DMA: scratch only: an array of DMA semaphores
 *	(pltpu.SemaphoreType.DMA), rank 1, int32, @shape[0] of them
 * @TPU_MEM_SEM_REGULAR: scratch only: an array of counting semaphores
 *	(pltpu.SemaphoreType.REGULAR), as for %TPU_MEM_SEM_DMA
 * @TPU_MEM_COUNT: number of spaces
 *
 * Semaphores take no VMEM or SMEM; at most %TPU_JOB_MAX_SEMAPHORES in one
 * scratch.
 */
enum tpu_memory_space {
	TPU_MEM_VMEM = 0,
	TPU_MEM_SMEM = 1,
	TPU_MEM_ANY = 2,
	TPU_MEM_SEM_DMA = 3,
	TPU_MEM_SEM_REGULAR = 4,
	TPU_MEM_COUNT
};

/**
 * struct tpu_job_scratch - a scratch buffer living across grid steps (an
 *	accumulator); each core has its own, uninitialised at the first step
 * @space: &enum tpu_memory_space
 * @dtype: &enum tpu_dtype
 * @rank: number of dimensions, 1 to %TPU_JOB_MAX_RANK
 * @reserved0: must be zero
 * @shape: extent of each dimension, 1 to %TPU_JOB_MAX_DIM; entries at and
 *	beyond @rank must be zero. In the body the buffer is a 2-D ref like an
 *	operand's block.
 * @reserved1: must be zero
 */
struct tpu_job_scratch {
	__u8 space;
	__u8 dtype;
	__u8 rank;
	__u8 reserved0;
	__u32 shape[TPU_JOB_MAX_RANK];
	__u32 reserved1[3];
};

/**
 * enum tpu_ref_kind - what a micro-op's ref designates
 * @TPU_REF_NONE: no ref (an unused source)
 * @TPU_REF_OPERAND: the current VMEM block of operand @index (an input or
 *	output), or for a scalar-prefetch operand its SMEM array
 * @TPU_REF_SCRATCH: scratch buffer @index
 * @TPU_REF_WINDOW: window @index of the window array: a slice of an
 *	operand's block, an operand's HBM array (%TPU_MEM_ANY) or a scratch
 *
 * A %TPU_REF_OPERAND of space %TPU_MEM_ANY, or a window of one, may only
 * be a source or destination of an async copy.
 */
enum tpu_ref_kind {
	TPU_REF_NONE = 0,
	TPU_REF_OPERAND = 1,
	TPU_REF_SCRATCH = 2,
	TPU_REF_WINDOW = 3,
};

/**
 * struct tpu_job_ref - a VMEM (or, for scalar broadcast, SMEM) ref
 * @kind: &enum tpu_ref_kind
 * @index: operand, scratch or window index
 */
struct tpu_job_ref {
	__u8 kind;
	__u8 index;
};

/**
 * struct tpu_job_window - a slice of a ref: ref.at[pl.ds(start, size), i]
 * @base: the ref sliced (%TPU_REF_OPERAND or %TPU_REF_SCRATCH): an
 *	operand's current block, or its whole array for %TPU_MEM_ANY; a
 *	scalar-prefetch operand's SMEM array (a copy's source or destination
 *	only); a VMEM or SMEM scratch buffer (not a semaphore); its rank is
 *	the window's rank
 * @squeeze: bit d set: dimension d is indexed, not sliced (size 1, dropped
 *	from the window's shape); bits at and beyond the rank must be zero
 * @reserved0: must be zero
 * @size: extent of each dimension, 1 to the base's extent (1 where
 *	squeezed); entries at and beyond the rank must be zero
 * @start: program leaving the rank start indices, dimension 0 deepest,
 *	evaluated at each use (slices start from program ids, SMEM page
 *	tables, ...); zero length: every start is 0. A window whose
 *	[start, start + size) leaves its base in some dimension fails the job
 *	with %TPU_JOB_ERR_WINDOW_OOB.
 * @stride: step of each dimension, pl.ds(start, size, stride): the
 *	window takes start + k * stride for k < size; 0 and 1 both mean 1
 *	(descriptors older than the field have 0); entries at and beyond
 *	the rank and of squeezed dimensions must be 0 or 1. The window
 *	leaves its base when start + (size - 1) * stride does.
 *
 * In the body, a window of a VMEM ref is a 2-D ref like a block (its last
 * dimension the columns, the product of the other unsqueezed sizes the
 * rows, a base row apart): every dimension after the first unsqueezed one
 * is unsqueezed, and whole but for the last (a window squeezed in every
 * dimension is a 1 x 1 ref), and it has no stride above 1. Async copies
 * take any window, strided ones too (x_ref[::2] goes through a copy).
 * Windows of SMEM refs serve copies only; %TPU_OP_SCALAR_STORE and
 * %TPU_BCAST_SMEM take whole refs.
 */
struct tpu_job_window {
	struct tpu_job_ref base;
	__u8 squeeze;
	__u8 reserved0;
	__u32 size[TPU_JOB_MAX_RANK];
	struct tpu_job_prog start;
	__u8 stride[TPU_JOB_MAX_RANK];
};

/**
 * enum tpu_opcode - micro-ops of the kernel body
 * @TPU_OP_ZERO: dst[...] = 0 (jnp.zeros_like)
 * @TPU_OP_DOT: dst (=|+=) dot_general(src0, src1) with contraction dims
 *	from &tpu_job_op.dot; f32 x f32 and bf16 x bf16 into an f32 dst,
 *	int8/uint8 x int8/uint8 into an int32 dst
 * @TPU_OP_UNARY: dst[...] = fn(src0[...]).astype(dst.dtype), fn from
 *	&enum tpu_unary; with %TPU_UNARY_IDENTITY this is cast/store
 * @TPU_OP_BINARY: dst[...] = fn(src0[...], b).astype(dst.dtype), fn from
 *	&enum tpu_binary, b is src1 broadcast as &tpu_job_op.bcast says
 * @TPU_OP_REDUCE: dst[...] = fn(src0[...], axis=@axis, keepdims=True), fn
 *	from &enum tpu_reduce (jnp.sum, jnp.max, jnp.min); @axis 1 reduces each
 *	row over its columns (dst is rows x 1), @axis 0 each column over the
 *	rows (dst is 1 x cols). Only the in-bounds part of an edge block is
 *	reduced (Pallas on a TPU would read its padding: see
 *	%TPU_JOB_F_DEBUG); rows or columns wholly outside the array give the
 *	fn's identity.
 * @TPU_OP_SELECT: dst[...] = jnp.where(src0[...], a, b): src0 is a mask of
 *	dst's shape (any dtype, non-zero is true), a is src1 broadcast as
 *	@bcast says, b is src2 broadcast as @bcast2 says
 * @TPU_OP_IOTA: dst[...] = lax.broadcasted_iota(dst.dtype, dst.shape,
 *	@axis) + s: each element's row (@axis 0) or column (@axis 1) index
 *	plus the value s of the program @scalar_index (0 if it has zero
 *	length); no sources
 * @TPU_OP_COPY_START: pltpu.make_async_copy(src0, dst, sem).start(): copy
 *	the window or ref src0 to dst (same dtype, or dtypes of one width
 *	but bool, whose bytes it moves as they are: a bitcast; same shape
 *	once squeezed dimensions are dropped; any spaces but semaphores; dst
 *	never an input operand's block or array) on the DMA engine, then add its bytes to DMA
 *	semaphore element @scalar_index (a program leaving the element's
 *	index; zero length: 0) of the scratch src1. A copy whose source and
 *	destination overlap (two windows of one ref) moves row by row of its
 *	innermost dimension, in row-major order (on a TPU: undefined).
 * @TPU_OP_COPY_WAIT: .wait() of that copy: wait until DMA semaphore
 *	src1[@scalar_index] holds dst's bytes and take them (src0 may be
 *	%TPU_REF_NONE; only dst's size matters, its window starts are not
 *	evaluated); the oldest copies in flight on that semaphore whose bytes
 *	add up to it are retired. A wait no copy in flight can satisfy fails
 *	the job at once with %TPU_JOB_ERR_SEMAPHORE, never hangs.
 * @TPU_OP_SEM_SIGNAL: pltpu.semaphore_signal(src1.at[i], n): @scalar_index
 *	leaves i then n (n >= 0); src1 a semaphore scratch
 * @TPU_OP_SEM_WAIT: pltpu.semaphore_wait(src1.at[i], n): wait until the
 *	semaphore holds n and take it; @scalar_index leaves i then n (n >= 0).
 *	As nothing else on the core can signal it meanwhile, a semaphore below
 *	n fails the job with %TPU_JOB_ERR_SEMAPHORE. Either kind of
 *	semaphore may be signalled and waited on this way.
 * @TPU_OP_SCALAR_STORE: dst[i] = v for an SMEM ref dst (a scalar-prefetch
 *	operand, an SMEM scratch or an SMEM-space output's block):
 *	@scalar_index leaves the flat index i then the value v, stored
 *	as dst's dtype: integers keep v's low bits (int32, uint32, int8,
 *	uint8), bool is v != 0, f32 and bf16 round v once to nearest even.
 *	An index outside dst (in its elements) fails with
 *	%TPU_JOB_ERR_SMEM_RANGE, even inside the job's SMEM (loads read on,
 *	stores would change another operand). Stores to a
 *	scalar-prefetch operand change its SMEM copy, not its HBM array.
 * @TPU_OP_TRANSPOSE: dst[...] = src0[...].T: dst is src0's columns by its
 *	rows, of src0's dtype, and not src0 or a window of src0's ref
 * @TPU_OP_ROLL: dst[...] = pltpu.roll(src0[...], s, @axis), as jnp.roll:
 *	the element at index i along @axis moves to (i + s) mod the extent
 *	(s may be negative), s the value of the program @scalar_index; dst
 *	has src0's shape and dtype and is not src0 or a window of its ref
 * @TPU_OP_GATHER: dst[...] = jnp.take_along_axis(src0[...], src1[...],
 *	@axis): src1 holds int32 indices along @axis, dst has src1's shape and
 *	src0's dtype (any: elements are moved as bytes); src1 has src0's rows
 *	(@axis 1: dst[r, c] = src0[r, src1[r, c]]) or columns (@axis 0:
 *	dst[r, c] = src0[src1[r, c], c]). fn is &enum tpu_gather_mode, what
 *	an index outside src0 gives. dst is neither source nor a window of
 *	one's ref
 * @TPU_OP_PRNG_SEED: pltpu.prng_seed(s0, ...): @scalar_index leaves fn + 1
 *	values (1 to %TPU_PRNG_MAX_SEEDS seeds, each taken as int32) that key
 *	the core's PRNG and restart its draw counter; dst and the sources are
 *	none. Each core has its own PRNG state, living across the core's
 *	steps; a job starts every core's state as if seeded with the one
 *	seed 0
 * @TPU_OP_PRNG_BITS: dst[...] = pltpu.prng_random_bits(dst's shape): an
 *	int32 or uint32 dst (the bits are the same) filled
 *	with 32 random bits per element, then the draw counter advances.
 *	The bits are Philox-4x32-10 of the key (the seeds folded together) and
 *	the counter (element, draw): deterministic for the same seeds and
 *	draws, not those of a TPU's hardware generator
 * @TPU_OP_LOOP: a device loop (lax.fori_loop, pl.loop, lax.while_loop):
 *	the next @imm ops (1 or more, all inside the op array, and inside
 *	the body of every loop enclosing this one) are its body, run once
 *	per trip, in order, before the op after the body. fn is &enum
 *	tpu_loop_kind. @pred decides whether the loop runs at all; its
 *	programs run at the loop op's own depth (they see the enclosing
 *	loops' indices, not its own). Loops nest at most
 *	%TPU_JOB_MAX_LOOP_DEPTH deep; programs of the ops inside read the
 *	trip index with %TPU_INSN_PUSH_LOOP_INDEX. Refs are none. A loop
 *	entered with more than %TPU_JOB_MAX_TRIPS trips, or a while loop
 *	still true after its maximum, fails the job with
 *	%TPU_JOB_ERR_LOOP; the device checks for a queue reset at every
 *	trip. The timing model charges the body's ops at every trip.
 * @TPU_OP_DEBUG_PRINT: pl.debug_print(fmt, *args): append a record
 *	(uapi/tpu_print.h) to the job's print buffer (%TPU_JOB_F_PRINT):
 *	the step, the op's index, @imm (the format's number, the runtime's
 *	to interpret), the fn values (0 to %TPU_PRINT_MAX_SCALARS) that
 *	@scalar_index leaves (zero length when fn is 0), then every element
 *	of src0, src1 and src2 (each a VMEM ref or none; a none source is
 *	followed by none), row-major, widened to 64 bits. dst is none. A
 *	record that does not fit is dropped and counted; the job goes on.
 *	Reads are not checked against copies in flight. The timing model
 *	charges it nothing, as a scalar store (the scalar core's work)
 * @TPU_OP_DELAY: pltpu.delay(nanos): the core stalls @imm nanoseconds, 1
 *	to %TPU_JOB_MAX_DELAY_NS: the timing model charges them to the step
 *	(a bubble, as a wait for a copy), and nothing else changes; no refs,
 *	fn 0. The device does not wait in host time.
 * @TPU_OP_COUNT: number of opcodes
 *
 * dst is never an input operand (input blocks are read-only). Elementwise
 * ops (UNARY, BINARY, SELECT, IOTA) compute from exact conversions of their
 * inputs, then round into dst: to nearest even for f32; to nearest even
 * bf16 for bf16; for integer types, casts (%TPU_UNARY_IDENTITY) from
 * floating point truncate toward zero as jnp's astype does, other results
 * of floating-point data (an input, or a scalar that is no integer) round
 * to nearest even, both saturating (NaN becomes 0); for %TPU_DTYPE_BOOL, non-zero (NaN included) becomes 1.
 * Integer inputs with an integer dst compute in 64-bit integers modulo
 * 2^64 and keep the low bits of dst's width, two's complement, as XLA's
 * integer arithmetic and convert do: add, sub, mul, neg, abs, square, pow
 * (b >= 0: repeated multiplies; b < 0: 1 of 1, +-1 of -1, else 0), floor
 * division (INT32_MIN // -1 is INT32_MIN) and sums wrap around (int32
 * INT32_MAX + 1 is INT32_MIN, int8 127 + 1 is -128, uint8 255 + 1 is 0),
 * as do casts from another integer type (int32 300 is int8 44); signed
 * div and mod by zero fail the job (%TPU_JOB_ERR_DIV_ZERO), a
 * %TPU_DTYPE_UINT32 dst's are XLA's (x / 0 = UINT32_MAX, x % 0 = x).
 * src0 has dst's shape unless the opcode says otherwise. Each function's
 * accuracy is documented in doc/numerics.md.
 */
enum tpu_opcode {
	TPU_OP_ZERO = 0,
	TPU_OP_DOT = 1,
	TPU_OP_UNARY = 2,
	TPU_OP_BINARY = 3,
	TPU_OP_REDUCE = 4,
	TPU_OP_SELECT = 5,
	TPU_OP_IOTA = 6,
	TPU_OP_COPY_START = 7,
	TPU_OP_COPY_WAIT = 8,
	TPU_OP_SEM_SIGNAL = 9,
	TPU_OP_SEM_WAIT = 10,
	TPU_OP_SCALAR_STORE = 11,
	TPU_OP_TRANSPOSE = 12,
	TPU_OP_ROLL = 13,
	TPU_OP_GATHER = 14,
	TPU_OP_PRNG_SEED = 15,
	TPU_OP_PRNG_BITS = 16,
	TPU_OP_LOOP = 17,
	TPU_OP_DEBUG_PRINT = 18,
	TPU_OP_DELAY = 19,
	TPU_OP_COUNT
};

/**
 * enum tpu_loop_kind - &tpu_job_op.fn of %TPU_OP_LOOP
 * @TPU_LOOP_FOR: lax.fori_loop(lo, hi, ...): &tpu_job_op.scalar_index
 *	leaves lo then hi, evaluated once when the loop is entered; the trip
 *	index runs from lo to hi - 1 (no trip when hi <= lo); &tpu_job_op.imm2
 *	is zero
 * @TPU_LOOP_WHILE: lax.while_loop: &tpu_job_op.scalar_index leaves the
 *	condition, evaluated before every trip (it reads SMEM that the
 *	body's %TPU_OP_SCALAR_STORE updates); the trip index counts trips
 *	from 0; &tpu_job_op.imm2 is the most trips it may take, 1 to
 *	%TPU_JOB_MAX_TRIPS (0 means %TPU_JOB_MAX_TRIPS)
 * @TPU_LOOP_COUNT: number of kinds
 */
enum tpu_loop_kind {
	TPU_LOOP_FOR = 0,
	TPU_LOOP_WHILE = 1,
	TPU_LOOP_COUNT
};

/* The most seeds one %TPU_OP_PRNG_SEED takes (its fn is their count - 1). */
#define TPU_PRNG_MAX_SEEDS 4

/* The most scalar values one %TPU_OP_DEBUG_PRINT records (its fn). */
#define TPU_PRINT_MAX_SCALARS 8

/**
 * enum tpu_gather_mode - &tpu_job_op.fn of %TPU_OP_GATHER: out-of-range indices
 * @TPU_GATHER_FILL: jnp.take_along_axis's default mode="fill": an index
 *	i in [-n, 0) means n + i (n src0's extent along the axis), any other
 *	index outside [0, n) gives the fill value: @imm's binary32 value
 *	converted to dst's dtype as %TPU_UNARY_IDENTITY would, but a NaN
 *	gives jnp's default fill in every dtype (NaN for floats, the lowest
 *	value of signed integers, the highest of unsigned ones, true for bool)
 * @TPU_GATHER_PROMISE: mode="promise_in_bounds": no index is normalised,
 *	and one outside [0, n) fails the job with %TPU_JOB_ERR_WINDOW_OOB
 *	naming the op, step and element (on a TPU the result is undefined)
 * @TPU_GATHER_COUNT: number of modes
 */
enum tpu_gather_mode {
	TPU_GATHER_FILL = 0,
	TPU_GATHER_PROMISE = 1,
	TPU_GATHER_COUNT
};

/**
 * enum tpu_unary - elementwise functions of %TPU_OP_UNARY
 * @TPU_UNARY_IDENTITY: x
 * @TPU_UNARY_RELU: max(x, 0)
 * @TPU_UNARY_GELU: jax.nn.gelu's tanh form,
 *	0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * @TPU_UNARY_SILU: x * sigmoid(x)
 * @TPU_UNARY_SIGMOID: 1 / (1 + exp(-x))
 * @TPU_UNARY_TANH: tanh(x)
 * @TPU_UNARY_EXP: exp(x)
 * @TPU_UNARY_NEG: -x
 * @TPU_UNARY_ABS: |x|
 * @TPU_UNARY_RECIPROCAL: 1 / x (pl.reciprocal)
 * @TPU_UNARY_SQRT: sqrt(x)
 * @TPU_UNARY_RSQRT: 1 / sqrt(x) (lax.rsqrt)
 * @TPU_UNARY_LOG: natural logarithm
 * @TPU_UNARY_LOG1P: log(1 + x)
 * @TPU_UNARY_EXP2: 2^x
 * @TPU_UNARY_SQUARE: x * x
 * @TPU_UNARY_FLOOR: floor(x)
 * @TPU_UNARY_CEIL: ceil(x)
 * @TPU_UNARY_SIGN: -1, 0 or 1 with x's sign (NaN stays NaN, -0 stays -0)
 * @TPU_UNARY_NOT: logical not: 1 where x is zero, else 0
 * @TPU_UNARY_CLAMP: jnp.clip(x, lo, hi) with lo the binary32 bits in
 *	&tpu_job_op.imm and hi those in &tpu_job_op.imm2
 * @TPU_UNARY_ROUND: x rounded to the nearest integer, ties to even
 *	(jnp.round)
 * @TPU_UNARY_SIN: sin(x), x in radians
 * @TPU_UNARY_COS: cos(x)
 * @TPU_UNARY_ERF: the error function (jax.lax.erf; jax.nn.gelu's exact
 *	form is 0.5 * x * (1 + erf(x / sqrt(2))))
 * @TPU_UNARY_POPCNT: the number of one bits of x in src0's width, two's
 *	complement (lax.population_count); integer src0 and dst only
 * @TPU_UNARY_CLZ: the number of leading zero bits of x in src0's width
 *	(lax.clz: the width for 0); integer src0 and dst only
 * @TPU_UNARY_COUNT: number of functions
 */
enum tpu_unary {
	TPU_UNARY_IDENTITY = 0,
	TPU_UNARY_RELU = 1,
	TPU_UNARY_GELU = 2,
	TPU_UNARY_SILU = 3,
	TPU_UNARY_SIGMOID = 4,
	TPU_UNARY_TANH = 5,
	TPU_UNARY_EXP = 6,
	TPU_UNARY_NEG = 7,
	TPU_UNARY_ABS = 8,
	TPU_UNARY_RECIPROCAL = 9,
	TPU_UNARY_SQRT = 10,
	TPU_UNARY_RSQRT = 11,
	TPU_UNARY_LOG = 12,
	TPU_UNARY_LOG1P = 13,
	TPU_UNARY_EXP2 = 14,
	TPU_UNARY_SQUARE = 15,
	TPU_UNARY_FLOOR = 16,
	TPU_UNARY_CEIL = 17,
	TPU_UNARY_SIGN = 18,
	TPU_UNARY_NOT = 19,
	TPU_UNARY_CLAMP = 20,
	TPU_UNARY_ROUND = 21,
	TPU_UNARY_SIN = 22,
	TPU_UNARY_COS = 23,
	TPU_UNARY_ERF = 24,
	TPU_UNARY_POPCNT = 25,
	TPU_UNARY_CLZ = 26,
	TPU_UNARY_COUNT
};

/**
 * enum tpu_binary - elementwise functions of %TPU_OP_BINARY
 * @TPU_BINARY_ADD: a + b
 * @TPU_BINARY_SUB: a - b
 * @TPU_BINARY_MUL: a * b
 * @TPU_BINARY_MAX: max(a, b)
 * @TPU_BINARY_MIN: min(a, b)
 * @TPU_BINARY_DIV: a / b; IEEE division (x / 0 is inf or NaN) unless a, b
 *	and dst are all integer types (a whole-number %TPU_BCAST_IMM counts as
 *	one): then floor division (Python's //), and b == 0 fails the job with
 *	%TPU_JOB_ERR_DIV_ZERO naming the op and step
 * @TPU_BINARY_POW: a ** b (jnp.power)
 * @TPU_BINARY_MOD: a - b * floor(a / b) (Python's %, the sign of b); for
 *	integer types b == 0 fails as for %TPU_BINARY_DIV
 * @TPU_BINARY_EQ: a == b (1 or 0; usually into a %TPU_DTYPE_BOOL dst)
 * @TPU_BINARY_NE: a != b
 * @TPU_BINARY_LT: a < b
 * @TPU_BINARY_LE: a <= b
 * @TPU_BINARY_GT: a > b
 * @TPU_BINARY_GE: a >= b
 * @TPU_BINARY_AND: logical and of masks (non-zero is true), 1 or 0
 * @TPU_BINARY_OR: logical or of masks, 1 or 0
 * @TPU_BINARY_BITAND: a & b, bit by bit
 * @TPU_BINARY_BITOR: a | b
 * @TPU_BINARY_BITXOR: a ^ b
 * @TPU_BINARY_SHL: a << b (lax.shift_left)
 * @TPU_BINARY_SHR: a >> b, arithmetic (lax.shift_right_arithmetic)
 * @TPU_BINARY_SHR_LOGICAL: a >> b on the bits as unsigned
 *	(lax.shift_right_logical)
 * @TPU_BINARY_COUNT: number of functions
 *
 * max and min propagate NaN, as jnp.maximum and jnp.minimum do.
 *
 * The bitwise functions (%TPU_BINARY_BITAND to %TPU_BINARY_SHR_LOGICAL)
 * take integer types only (src0, b and dst; an immediate b a whole number)
 * and work on dst's width, wrapping as two's complement. A shift by a
 * count outside [0, width) gives 0, or for %TPU_BINARY_SHR the sign (0 or
 * -1), as XLA's shifts do. %TPU_BINARY_SHR of a %TPU_DTYPE_UINT32 dst
 * shifts the bits in copies of the top bit, as XLA's
 * shift_right_arithmetic of u32 does (0x80000000 >> 31 is UINT32_MAX).
 */
enum tpu_binary {
	TPU_BINARY_ADD = 0,
	TPU_BINARY_SUB = 1,
	TPU_BINARY_MUL = 2,
	TPU_BINARY_MAX = 3,
	TPU_BINARY_MIN = 4,
	TPU_BINARY_DIV = 5,
	TPU_BINARY_POW = 6,
	TPU_BINARY_MOD = 7,
	TPU_BINARY_EQ = 8,
	TPU_BINARY_NE = 9,
	TPU_BINARY_LT = 10,
	TPU_BINARY_LE = 11,
	TPU_BINARY_GT = 12,
	TPU_BINARY_GE = 13,
	TPU_BINARY_AND = 14,
	TPU_BINARY_OR = 15,
	TPU_BINARY_BITAND = 16,
	TPU_BINARY_BITOR = 17,
	TPU_BINARY_BITXOR = 18,
	TPU_BINARY_SHL = 19,
	TPU_BINARY_SHR = 20,
	TPU_BINARY_SHR_LOGICAL = 21,
	TPU_BINARY_COUNT
};

/**
 * enum tpu_reduce - reductions of %TPU_OP_REDUCE
 * @TPU_REDUCE_SUM: sum; float types accumulate in double and round once
 *	into dst, integer types in 64-bit integers (modulo 2^64, then the
 *	low bits of dst's width: the sum wraps around, as XLA's does)
 * @TPU_REDUCE_MAX: maximum (NaN propagates; identity -inf, or the
 *	integer type's minimum)
 * @TPU_REDUCE_MIN: minimum (NaN propagates; identity +inf, or the
 *	integer type's maximum)
 * @TPU_REDUCE_ARGMAX: index of the maximum (jnp.argmax: the first of
 *	equal maxima, the first NaN if any) into an int32 dst; 0 where a
 *	row or column lies wholly out of bounds
 * @TPU_REDUCE_ARGMIN: index of the minimum, likewise
 * @TPU_REDUCE_COUNT: number of reductions
 */
enum tpu_reduce {
	TPU_REDUCE_SUM = 0,
	TPU_REDUCE_MAX = 1,
	TPU_REDUCE_MIN = 2,
	TPU_REDUCE_ARGMAX = 3,
	TPU_REDUCE_ARGMIN = 4,
	TPU_REDUCE_COUNT
};

/**
 * enum tpu_bcast - how %TPU_OP_BINARY reads its second source
 * @TPU_BCAST_NONE: src1 has dst's shape
 * @TPU_BCAST_ROW: src1 is one row (1 x cols), added to every row (a bias)
 * @TPU_BCAST_COL: src1 is one column (rows x 1), applied to every column
 * @TPU_BCAST_SMEM: src1 is a scalar-prefetch operand, an SMEM-space
 *	operand (its current block) or an SMEM scratch; the element at flat
 *	index &tpu_job_op.scalar_index (a program) is used
 * @TPU_BCAST_IMM: no src1; the scalar is &tpu_job_op.imm, binary32 bits
 * @TPU_BCAST_SCALAR: no src1; the scalar is the value the program
 *	&tpu_job_op.scalar_index leaves (pl.program_id, pl.num_programs, SMEM
 *	reads and arithmetic on them), a 64-bit integer
 * @TPU_BCAST_COUNT: number of broadcast modes
 *
 * %TPU_OP_SELECT reads its a (src1) with &tpu_job_op.bcast and its b (src2)
 * with &tpu_job_op.bcast2, where %TPU_BCAST_IMM means &tpu_job_op.imm2 and
 * %TPU_BCAST_SMEM and %TPU_BCAST_SCALAR are not allowed.
 */
enum tpu_bcast {
	TPU_BCAST_NONE = 0,
	TPU_BCAST_ROW = 1,
	TPU_BCAST_COL = 2,
	TPU_BCAST_SMEM = 3,
	TPU_BCAST_IMM = 4,
	TPU_BCAST_SCALAR = 5,
	TPU_BCAST_COUNT
};

/**
 * enum tpu_dot_flags - &tpu_job_op.dot of %TPU_OP_DOT
 * @TPU_DOT_LHS_CONTRACT_0: src0 is contracted on its dimension 0 (x.T @ y);
 *	otherwise on dimension 1
 * @TPU_DOT_RHS_CONTRACT_1: src1 is contracted on its dimension 1 (x @ y.T);
 *	otherwise on dimension 0
 * @TPU_DOT_ACCUMULATE: dst += product; otherwise dst = product
 * @TPU_DOT_ALL: every defined flag; other bits must be zero
 */
enum tpu_dot_flags {
	TPU_DOT_LHS_CONTRACT_0 = 1u << 0,
	TPU_DOT_RHS_CONTRACT_1 = 1u << 1,
	TPU_DOT_ACCUMULATE = 1u << 2,
	TPU_DOT_ALL = 0x7,
};

/**
 * struct tpu_job_op - one micro-op of the kernel body
 * @opcode: &enum tpu_opcode
 * @fn: &enum tpu_unary, &enum tpu_binary, &enum tpu_reduce, &enum
 *	tpu_gather_mode or &enum tpu_loop_kind; the seed count - 1 of %TPU_OP_PRNG_SEED; the
 *	number of scalar values of %TPU_OP_DEBUG_PRINT; zero for other
 *	opcodes
 * @bcast: &enum tpu_bcast for %TPU_OP_BINARY and %TPU_OP_SELECT's src1;
 *	zero otherwise
 * @dot: &enum tpu_dot_flags for %TPU_OP_DOT; zero otherwise
 * @dst: the ref written
 * @src0: first source (%TPU_REF_NONE for %TPU_OP_ZERO and %TPU_OP_IOTA)
 * @src1: second source (%TPU_REF_NONE unless DOT, GATHER's indices, or
 *	BINARY or SELECT with a @bcast that reads a ref)
 * @axis: 0 or 1 for %TPU_OP_REDUCE, %TPU_OP_IOTA, %TPU_OP_ROLL and
 *	%TPU_OP_GATHER; zero otherwise
 * @bcast2: &enum tpu_bcast for %TPU_OP_SELECT's src2; zero otherwise
 * @pred: predicate program leaving one value: the op runs at a step where
 *	it is non-zero (pl.when); zero length runs it at every step
 * @scalar_index: program leaving the flat element index into src1 for
 *	%TPU_BCAST_SMEM, the scalar itself for %TPU_BCAST_SCALAR, the offset
 *	of %TPU_OP_IOTA, the shift of %TPU_OP_ROLL, the values the copy and
 *	semaphore ops and %TPU_OP_SCALAR_STORE name, the seeds of
 *	%TPU_OP_PRNG_SEED, a loop's bounds or condition (&enum
 *	tpu_loop_kind), the values %TPU_OP_DEBUG_PRINT records; zero length
 *	otherwise
 * @imm: binary32 bits: the scalar for %TPU_BCAST_IMM, lo for
 *	%TPU_UNARY_CLAMP, the fill value of %TPU_GATHER_FILL; for
 *	%TPU_OP_LOOP the number of body ops (an integer); for
 *	%TPU_OP_DEBUG_PRINT the format's number (an integer); zero otherwise
 * @src2: third source: %TPU_OP_SELECT's b when @bcast2 reads a ref;
 *	%TPU_REF_NONE otherwise
 *
 * dst, src0, src1 and src2 of the compute ops may be windows of VMEM refs.
 * @reserved0: must be zero
 * @imm2: binary32 bits: %TPU_OP_SELECT's b for @bcast2 %TPU_BCAST_IMM, hi
 *	for %TPU_UNARY_CLAMP; a %TPU_LOOP_WHILE loop's most trips (an
 *	integer); zero otherwise
 * @reserved1: must be zero
 */
struct tpu_job_op {
	__u8 opcode;
	__u8 fn;
	__u8 bcast;
	__u8 dot;
	struct tpu_job_ref dst;
	struct tpu_job_ref src0;
	struct tpu_job_ref src1;
	__u8 axis;
	__u8 bcast2;
	struct tpu_job_prog pred;
	struct tpu_job_prog scalar_index;
	__u32 imm;
	struct tpu_job_ref src2;
	__u16 reserved0;
	__u32 imm2;
	__u32 reserved1[2];
};

/**
 * enum tpu_insn_op - scalar-core instructions
 * @TPU_INSN_PUSH_PID: push the grid index of dimension @arg
 *	(pl.program_id(arg))
 * @TPU_INSN_PUSH_NPROG: push the extent of grid dimension @arg
 *	(pl.num_programs(arg))
 * @TPU_INSN_PUSH_CONST: push @arg (sign-extended)
 * @TPU_INSN_LOAD_SMEM: pop a flat index, push that element of the SMEM
 *	array of scalar-prefetch operand @arg, or of the current block of
 *	SMEM-space operand @arg (not in index maps), widened: int8
 *	sign-extended, uint8, uint32 and bool zero-extended (bool 0 or 1),
 *	f32 and bf16 truncated toward zero (scalar prefetch: its int32
 *	words). As a TPU's scalar core, a load does not stop at the array's
 *	end: an index past it but inside the job's SMEM reads the element
 *	of the array's dtype there (SMEM holds the scalar-prefetch arrays
 *	back to back in operand order, then two buffers of each SMEM-space
 *	block, then SMEM scratch, each starting on a word; padding reads as
 *	zero), so JAX's lengths_ref[batch_size] reads the next prefetch
 *	array's first word. A negative index, or one past the job's SMEM,
 *	fails the job with %TPU_JOB_ERR_SMEM_RANGE
 * @TPU_INSN_ADD: pop b, pop a, push a + b (64-bit, wrapping)
 * @TPU_INSN_SUB: a - b
 * @TPU_INSN_MUL: a * b
 * @TPU_INSN_DIV: floor(a / b), rounding towards minus infinity (Python's
 *	//); b == 0 fails the job with %TPU_JOB_ERR_DIV_ZERO
 * @TPU_INSN_MOD: a - b * floor(a / b) (Python's %, the sign of b)
 * @TPU_INSN_MIN: min(a, b)
 * @TPU_INSN_MAX: max(a, b)
 * @TPU_INSN_EQ: a == b (1 or 0)
 * @TPU_INSN_NE: a != b
 * @TPU_INSN_LT: a < b
 * @TPU_INSN_LE: a <= b
 * @TPU_INSN_GT: a > b
 * @TPU_INSN_GE: a >= b
 * @TPU_INSN_AND: a && b (1 or 0)
 * @TPU_INSN_OR: a || b (1 or 0)
 * @TPU_INSN_NOT: pop a, push !a
 * @TPU_INSN_LOAD_SCRATCH: pop a flat index, push that element of the
 *	scratch numbered @arg, an SMEM scratch (widened as for
 *	%TPU_INSN_LOAD_SMEM, reading on past its end to the job's SMEM end as
 *	that does) or a semaphore scratch (its count, pltpu.semaphore_read); an
 *	index outside those fails with %TPU_JOB_ERR_SMEM_RANGE
 * @TPU_INSN_PUSH_LOOP_INDEX: push the trip index of the enclosing
 *	%TPU_OP_LOOP at depth @arg (0 the outermost): in programs of ops
 *	inside at least @arg + 1 loops (predicates, scalar_index) and in
 *	window starts whose every user is; never in index maps
 * @TPU_INSN_COUNT: number of instructions
 *
 * Values are signed 64-bit. Each program is checked before the job runs:
 * known opcode, @arg in range, the stack never underflows nor exceeds
 * %TPU_JOB_MAX_STACK, and the program leaves exactly the values its user
 * needs.
 */
enum tpu_insn_op {
	TPU_INSN_PUSH_PID = 0,
	TPU_INSN_PUSH_NPROG = 1,
	TPU_INSN_PUSH_CONST = 2,
	TPU_INSN_LOAD_SMEM = 3,
	TPU_INSN_ADD = 4,
	TPU_INSN_SUB = 5,
	TPU_INSN_MUL = 6,
	TPU_INSN_DIV = 7,
	TPU_INSN_MOD = 8,
	TPU_INSN_MIN = 9,
	TPU_INSN_MAX = 10,
	TPU_INSN_EQ = 11,
	TPU_INSN_NE = 12,
	TPU_INSN_LT = 13,
	TPU_INSN_LE = 14,
	TPU_INSN_GT = 15,
	TPU_INSN_GE = 16,
	TPU_INSN_AND = 17,
	TPU_INSN_OR = 18,
	TPU_INSN_NOT = 19,
	TPU_INSN_LOAD_SCRATCH = 20,
	TPU_INSN_PUSH_LOOP_INDEX = 21,
	TPU_INSN_COUNT
};

/**
 * struct tpu_job_insn - one scalar-core instruction
 * @op: &enum tpu_insn_op
 * @reserved: must be zero
 * @arg: immediate: a grid dimension, a constant, an operand index or a
 *	loop depth; zero
 *	for instructions that take none
 */
struct tpu_job_insn {
	__u8 op;
	__u8 reserved[3];
	__s32 arg;
};

/**
 * enum tpu_job_error - why a job failed (0 is success)
 * @TPU_JOB_OK: the job ran to completion
 * @TPU_JOB_ERR_DESCRIPTOR: malformed descriptor (bad magic, version, size,
 *	offset, count, enum value, shape, non-zero reserved field, ...)
 * @TPU_JOB_ERR_BYTECODE: a program is malformed (unknown instruction, bad
 *	argument, stack underflow or overflow, wrong number of results)
 * @TPU_JOB_ERR_BUFFER: an operand's array does not fit in its buffer slot,
 *	or the slot is not in the buffer table
 * @TPU_JOB_ERR_VMEM_LIMIT: double-buffered blocks plus VMEM scratch exceed
 *	the job's VMEM limit
 * @TPU_JOB_ERR_SMEM_LIMIT: scalar-prefetch arrays plus SMEM scratch exceed
 *	the device's SMEM
 * @TPU_JOB_ERR_BLOCK_OOB: an index map gave a block outside its array
 * @TPU_JOB_ERR_DIV_ZERO: a program divided by zero, or an integer
 *	%TPU_BINARY_DIV or %TPU_BINARY_MOD did
 * @TPU_JOB_ERR_SMEM_RANGE: a program loaded outside a scalar-prefetch array,
 *	or a scalar broadcast indexed outside its SMEM array
 * @TPU_JOB_ERR_HAZARD: debug mode: an output block written from two
 *	iterations of the parallel dimensions, or revisited after write-back
 * @TPU_JOB_ERR_INTERNAL: the device could not run the job (out of host
 *	memory, ...); not the job's fault
 * @TPU_JOB_ERR_ABORTED: the device stopped the job part-way because its
 *	queue was reset (a timeout); not the job's fault
 * @TPU_JOB_ERR_WINDOW_OOB: a window's slice (an async copy's source or
 *	destination, or a body op's ref) leaves its base ref, or an index of
 *	a %TPU_GATHER_PROMISE gather leaves its source
 * @TPU_JOB_ERR_SEMAPHORE: a wait on a semaphore that nothing in flight
 *	will signal, a semaphore index outside its scratch, a negative signal,
 *	or a semaphore not back at zero after a core's last step
 * @TPU_JOB_ERR_LOOP: a %TPU_OP_LOOP entered with more than
 *	%TPU_JOB_MAX_TRIPS trips, or a while loop still true after its
 *	maximum trips (&tpu_job_error_info.need the trips, .limit the
 *	maximum)
 */
enum tpu_job_error {
	TPU_JOB_OK = 0,
	TPU_JOB_ERR_DESCRIPTOR = 1,
	TPU_JOB_ERR_BYTECODE = 2,
	TPU_JOB_ERR_BUFFER = 3,
	TPU_JOB_ERR_VMEM_LIMIT = 4,
	TPU_JOB_ERR_SMEM_LIMIT = 5,
	TPU_JOB_ERR_BLOCK_OOB = 6,
	TPU_JOB_ERR_DIV_ZERO = 7,
	TPU_JOB_ERR_SMEM_RANGE = 8,
	TPU_JOB_ERR_HAZARD = 9,
	TPU_JOB_ERR_INTERNAL = 10,
	TPU_JOB_ERR_ABORTED = 11,
	TPU_JOB_ERR_WINDOW_OOB = 12,
	TPU_JOB_ERR_SEMAPHORE = 13,
	TPU_JOB_ERR_LOOP = 14,
};

/**
 * struct tpu_job_error_info - where a job failed, for the caller to print
 * @code: &enum tpu_job_error
 * @operand: the operand concerned, or 0xffffffff
 * @op: the micro-op concerned, or 0xffffffff
 * @reserved: must be zero
 * @step: row-major number of the grid step that failed, or ~0 before the
 *	first step
 * @block: the block index concerned (%TPU_JOB_ERR_BLOCK_OOB,
 *	%TPU_JOB_ERR_HAZARD), dimensions beyond the operand's rank zero
 * @need: bytes needed (%TPU_JOB_ERR_VMEM_LIMIT, %TPU_JOB_ERR_SMEM_LIMIT,
 *	%TPU_JOB_ERR_BUFFER)
 * @limit: bytes available in the same cases
 *
 * %TPU_JOB_ERR_WINDOW_OOB gives the window's base operand in @operand (or
 * 0xffffffff for a scratch base), the starts in @block, the window's index
 * in @need and the dimension that left its base in @limit.
 * %TPU_JOB_ERR_SEMAPHORE gives the semaphore's scratch index in @block[0],
 * its element in @block[1], its count in @block[2] and what was waited for
 * in @need.
 */
struct tpu_job_error_info {
	__u32 code;
	__u32 operand;
	__u32 op;
	__u32 reserved;
	__u64 step;
	__s64 block[TPU_JOB_MAX_RANK];
	__u64 need;
	__u64 limit;
};

/**
 * struct tpu_job_report - a job's outcome as the device reports it
 * @error: where the job failed; @error.code is 0 on success
 * @steps: grid steps run
 * @blocks_fetched: input blocks brought into VMEM
 * @blocks_skipped: input block fetches skipped (index unchanged)
 * @blocks_written: output blocks written back to HBM
 * @hbm_bytes_in: in-bounds bytes of fetched blocks
 * @hbm_bytes_out: in-bounds bytes written back
 * @mxu_flops: 2*m*n*k of every dot run (OPs for integer inputs)
 * @wall_ns: host time the device spent running the job
 * @model_time_ps: modeled time on the configured chip, in picoseconds
 * @model_mxu_busy_ps: modeled MXU busy time
 * @model_dma_busy_ps: modeled HBM <-> VMEM transfer time
 * @model_bubble_ps: modeled time the MXU waited for DMA
 * @cores_used: cores the grid was split across
 * @copies: async copies the body started (%TPU_OP_COPY_START); their
 *	HBM bytes are counted in @hbm_bytes_in and @hbm_bytes_out
 * @message: NUL-terminated explanation of a failure (field, operand, step)
 * @loop_trips: trips run by the job's %TPU_OP_LOOP ops, every entry of
 *	every loop on every core summed (after @message: a reader asking
 *	for fewer bytes gets the report without it)
 *
 * Wall time is the host's; modeled time is the chip's. They are never mixed.
 */
struct tpu_job_report {
	struct tpu_job_error_info error;
	__u64 steps;
	__u64 blocks_fetched;
	__u64 blocks_skipped;
	__u64 blocks_written;
	__u64 hbm_bytes_in;
	__u64 hbm_bytes_out;
	__u64 mxu_flops;
	__u64 wall_ns;
	__u64 model_time_ps;
	__u64 model_mxu_busy_ps;
	__u64 model_dma_busy_ps;
	__u64 model_bubble_ps;
	__u32 cores_used;
	__u32 copies;
	char message[256];
	__u64 loop_trips;
};

#endif /* TPU_JOB_H */
