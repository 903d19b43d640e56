// SPDX-License-Identifier: MIT
/*
 * Job descriptor checks: decode the little-endian blob into a plan in host
 * byte order and reject anything the device could not run safely, with a
 * message naming the field. The device works only from the decoded copy, so
 * a guest changing the blob after submission changes nothing.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tpu_check.h"
#include "tpu_print.h"
#include "tpu_trace.h"
#include "tpu_dtype.h"

_Static_assert(sizeof(struct tpu_job_header) == 88, "header layout");
_Static_assert(sizeof(struct tpu_job_operand) == 88, "operand layout");
_Static_assert(sizeof(struct tpu_job_scratch) == 32, "scratch layout");
_Static_assert(sizeof(struct tpu_job_op) == 48, "op layout");
_Static_assert(sizeof(struct tpu_job_insn) == 8, "insn layout");
_Static_assert(sizeof(struct tpu_job_error_info) == 72, "error layout");
_Static_assert(sizeof(struct tpu_job_window) == 32, "window layout");
/* The header's __u16 counts hold their limits, and a descriptor with every
 * array at its limit fits TPU_JOB_MAX_SIZE (all sizes are multiples of 8). */
_Static_assert(TPU_JOB_MAX_OPS <= UINT16_MAX && TPU_JOB_MAX_INSNS <= UINT16_MAX &&
	       TPU_JOB_MAX_WINDOWS <= UINT16_MAX, "counts fit the header");
_Static_assert(TPU_JOB_MAX_WINDOWS <= UINT8_MAX + 1, "a ref's index names every window");
_Static_assert(sizeof(struct tpu_job_header) +
	       TPU_JOB_MAX_OPERANDS * sizeof(struct tpu_job_operand) +
	       TPU_JOB_MAX_SCRATCH * sizeof(struct tpu_job_scratch) +
	       TPU_JOB_MAX_OPS * sizeof(struct tpu_job_op) +
	       TPU_JOB_MAX_INSNS * sizeof(struct tpu_job_insn) +
	       TPU_JOB_MAX_WINDOWS * sizeof(struct tpu_job_window) <= TPU_JOB_MAX_SIZE,
	       "a descriptor at every limit fits TPU_JOB_MAX_SIZE");

/* a * b, saturating: sizes past 2^64 are simply "too big" */
static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

int tpu_check_error(struct tpu_job_result *res, const char *fmt, ...)
{
	va_list ap;

	res->error.code = TPU_JOB_ERR_DESCRIPTOR;
	va_start(ap, fmt);
	vsnprintf(res->message, sizeof(res->message), fmt, ap);
	va_end(ap);
	return TPU_JOB_ERR_DESCRIPTOR;
}

bool tpu_check_all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/* An array of @count @size-byte entries at @offset lies inside the blob. */
static int check_section(struct tpu_job_result *res, const char *name,
			 uint32_t offset, uint32_t count, size_t size,
			 size_t len, size_t header_size)
{
	uint64_t end = (uint64_t)offset + (uint64_t)count * size;

	if (offset % 8)
		return tpu_check_error(res, "%s_offset %u: not 8-byte aligned",
					name, offset);
	if (count && offset < header_size)
		return tpu_check_error(res, "%s_offset %u: overlaps the header",
					name, offset);
	if (end > len)
		return tpu_check_error(res, "%s_offset %u + %u entries: past total_size %zu",
					name, offset, count, len);
	return 0;
}

static bool overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return alen && blen && a < b + blen && b < a + alen;
}

static int decode_header(const struct tpu_job_header *h, size_t len,
			 struct tpu_plan *plan, struct tpu_job_result *res)
{
	uint32_t off[5] = { le32(h->operands_offset), le32(h->scratch_offset),
			    le32(h->ops_offset), le32(h->code_offset),
			    le32(h->windows_offset) };
	static const char *const name[5] = { "operands", "scratch", "ops", "code",
					     "windows" };
	static const size_t size[5] = { sizeof(struct tpu_job_operand),
					sizeof(struct tpu_job_scratch),
					sizeof(struct tpu_job_op),
					sizeof(struct tpu_job_insn),
					sizeof(struct tpu_job_window) };
	uint32_t count[5];
	int ret;

	if (le32(h->magic) != TPU_JOB_MAGIC)
		return tpu_check_error(res, "magic %#x: not a job descriptor",
					le32(h->magic));
	if (le16(h->version) != TPU_JOB_VERSION)
		return tpu_check_error(res, "version %u: this device runs version %u",
					le16(h->version), TPU_JOB_VERSION);
	if (le16(h->header_size) != sizeof(*h))
		return tpu_check_error(res, "header_size %u: expected %zu",
					le16(h->header_size), sizeof(*h));
	if (le32(h->total_size) != len)
		return tpu_check_error(res, "total_size %u: descriptor is %zu bytes",
					le32(h->total_size), len);
	if (le32(h->flags) & ~(uint32_t)TPU_JOB_F_ALL)
		return tpu_check_error(res, "flags %#x: unknown bits", le32(h->flags));
	if (h->reserved0 || !tpu_check_all_zero(h->reserved2, sizeof(h->reserved2)))
		return tpu_check_error(res, "reserved: must be zero");
	if (h->trace_slot && !(le32(h->flags) & TPU_JOB_F_TRACE))
		return tpu_check_error(res, "trace_slot %u without TPU_JOB_F_TRACE: must be zero",
					le16(h->trace_slot));
	if (h->print_slot && !(le32(h->flags) & TPU_JOB_F_PRINT))
		return tpu_check_error(res, "print_slot %u without TPU_JOB_F_PRINT: must be zero",
					le16(h->print_slot));
	plan->flags = le32(h->flags);
	plan->trace_slot = le16(h->trace_slot);
	plan->print_slot = le16(h->print_slot);
	plan->vmem_limit = le64(h->vmem_limit_bytes);
	plan->grid_rank = h->grid_rank;
	plan->num_operands = h->num_operands;
	plan->num_scalar_prefetch = h->num_scalar_prefetch;
	plan->num_scratch = h->num_scratch;
	plan->num_ops = le16(h->num_ops);
	plan->num_insns = le16(h->num_insns);
	plan->num_windows = le16(h->num_windows);
	if (plan->grid_rank < 1 || plan->grid_rank > TPU_JOB_MAX_GRID_RANK)
		return tpu_check_error(res, "grid_rank %u: must be 1 to %d",
					plan->grid_rank, TPU_JOB_MAX_GRID_RANK);
	if (plan->num_operands < 1 || plan->num_operands > TPU_JOB_MAX_OPERANDS)
		return tpu_check_error(res, "num_operands %u: must be 1 to %d",
					plan->num_operands, TPU_JOB_MAX_OPERANDS);
	if (plan->num_scalar_prefetch > plan->num_operands)
		return tpu_check_error(res, "num_scalar_prefetch %u: more than num_operands %u",
					plan->num_scalar_prefetch, plan->num_operands);
	if (plan->num_scratch > TPU_JOB_MAX_SCRATCH)
		return tpu_check_error(res, "num_scratch %u: at most %d",
					plan->num_scratch, TPU_JOB_MAX_SCRATCH);
	if (plan->num_ops > TPU_JOB_MAX_OPS)
		return tpu_check_error(res, "num_ops %u: at most %d",
					plan->num_ops, TPU_JOB_MAX_OPS);
	if (plan->num_insns > TPU_JOB_MAX_INSNS)
		return tpu_check_error(res, "num_insns %u: at most %d",
					plan->num_insns, TPU_JOB_MAX_INSNS);
	if (plan->num_windows > TPU_JOB_MAX_WINDOWS)
		return tpu_check_error(res, "num_windows %u: at most %d",
					plan->num_windows, TPU_JOB_MAX_WINDOWS);

	plan->steps = 1;
	plan->parallel_iters = 1;
	for (unsigned int d = 0; d < TPU_JOB_MAX_GRID_RANK; d++) {
		uint32_t g = le32(h->grid[d]);
		uint8_t sem = h->dim_semantics[d];

		if (d >= plan->grid_rank) {
			if (g || sem)
				return tpu_check_error(res, "grid[%u]: must be zero beyond grid_rank",
							d);
			continue;
		}
		if (g < 1 || g > TPU_JOB_MAX_DIM)
			return tpu_check_error(res, "grid[%u] %u: must be 1 to %u",
						d, g, TPU_JOB_MAX_DIM);
		if (sem != TPU_DIM_PARALLEL && sem != TPU_DIM_ARBITRARY)
			return tpu_check_error(res, "dim_semantics[%u] %u: unknown",
						d, sem);
		plan->grid[d] = g;
		plan->semantics[d] = sem;
		plan->steps = mul_sat(plan->steps, g);
		if (sem == TPU_DIM_PARALLEL)
			plan->parallel_iters *= g;
	}
	if (plan->steps > TPU_JOB_MAX_STEPS)
		return tpu_check_error(res, "grid: %llu steps, at most %llu",
					(unsigned long long)plan->steps,
					(unsigned long long)TPU_JOB_MAX_STEPS);

	count[0] = plan->num_operands;
	count[1] = plan->num_scratch;
	count[2] = plan->num_ops;
	count[3] = plan->num_insns;
	count[4] = plan->num_windows;
	for (int i = 0; i < 5; i++) {
		ret = check_section(res, name[i], off[i], count[i], size[i], len,
				    sizeof(*h));
		if (ret)
			return ret;
		for (int j = 0; j < i; j++)
			if (overlap(off[i], count[i] * size[i],
				    off[j], count[j] * size[j]))
				return tpu_check_error(res, "%s_offset %u: overlaps %s",
							name[i], off[i], name[j]);
	}
	return 0;
}

/*
 * @prog of "@owner @index: @what" ("operand 2: index map", "op 0:
 * predicate"); @loop_depth: a program of the body inside that many loops,
 * which may read more of SMEM; -1: an index map.
 */
static int check_prog(const struct tpu_plan *plan, struct tpu_plan_prog prog,
		      unsigned int nresults, struct tpu_job_result *res,
		      const char *owner, unsigned int index, const char *what,
		      int loop_depth)
{
	char why[128];
	int bad;

	if (prog.len > TPU_JOB_MAX_PROG_LEN ||
	    (uint64_t)prog.offset + prog.len > plan->num_insns)
		return tpu_job_fail(res, TPU_JOB_ERR_BYTECODE,
				    "%s %u: %s: program [%u, +%u) outside the %u-insn code array (max length %d)",
				    owner, index, what, prog.offset, prog.len,
				    plan->num_insns, TPU_JOB_MAX_PROG_LEN);
	bad = loop_depth >= 0 ?
	      tpu_scalar_verify_body(plan, prog, (unsigned int)loop_depth,
				     nresults, why, sizeof(why)) :
	      tpu_scalar_verify(plan, prog, nresults, why, sizeof(why));
	if (bad)
		return tpu_job_fail(res, TPU_JOB_ERR_BYTECODE, "%s %u: %s: %s",
				    owner, index, what, why);
	return 0;
}

int tpu_check_prog(const struct tpu_plan *plan, unsigned int loop_depth,
		   struct tpu_plan_prog prog, unsigned int nresults,
		   struct tpu_job_result *res, const char *owner,
		   unsigned int index, const char *what)
{
	return check_prog(plan, prog, nresults, res, owner, index, what,
			  (int)loop_depth);
}

struct tpu_plan_prog tpu_check_decode_prog(const struct tpu_job_prog *p)
{
	return (struct tpu_plan_prog){ le32(p->offset), le16(p->len) };
}

static void derive_operand(struct tpu_plan_operand *o)
{
	uint64_t stride = 1, block_elems = 1;
	unsigned int last = o->rank - 1;

	for (int d = last; d >= 0; d--) {
		o->stride[d] = stride;
		stride = mul_sat(stride, o->shape[d]);
		block_elems = mul_sat(block_elems, o->block[d]);
		if (o->element_dims >> d & 1)
			o->nblocks[d] = o->element_pad[d] + o->shape[d];
		else
			o->nblocks[d] = o->block[d] ?
				(o->shape[d] + o->block[d] - 1) / o->block[d] : 0;
	}
	o->elems = stride;
	o->block_bytes = mul_sat(block_elems, tpu_dtype_size(o->dtype));
	o->cols = o->block[last];
	o->rows = o->cols ? (int64_t)(block_elems / o->cols) : 0;
}

static const char *const space_name[TPU_MEM_COUNT] = {
	"VMEM", "SMEM", "ANY", "DMA semaphore", "regular semaphore",
};

/*
 * pl.RevisitMode.ANY: an output block read back from HBM at each new
 * visit. Only outputs have blocks to read back (inputs are read at every
 * new index anyway), only VMEM and SMEM blocks exist to read into, and in
 * VMEM only with one buffer, as Mosaic ("RevisitMode.ANY is not supported
 * with double buffering"). Before buffers 0 becomes the default 2.
 */
static int check_revisit(const struct tpu_plan_operand *o, unsigned int i,
			 struct tpu_job_result *res)
{
	if (o->revisit == TPU_REVISIT_IMMEDIATE)
		return 0;
	if (o->revisit != TPU_REVISIT_ANY)
		return tpu_check_error(res, "operand %u: revisit %u unknown: IMMEDIATE (0) or ANY (1)",
					i, o->revisit);
	if (o->role != TPU_ROLE_OUTPUT)
		return tpu_check_error(res, "operand %u: revisit ANY is of outputs only: an input's block is read at every new index already",
					i);
	if (o->space == TPU_MEM_ANY)
		return tpu_check_error(res, "operand %u: revisit ANY: an output in space ANY has no blocks to read back",
					i);
	if (o->space == TPU_MEM_VMEM && o->buffers != 1)
		return tpu_check_error(res, "operand %u: revisit ANY with buffers %u: it takes pl.Buffered(1) (buffers 1), as Mosaic, which has no double-buffered form of it",
					i, o->buffers);
	return 0;
}

/*
 * An operand's memory space, pl.Buffered(n) and alias fields (the alias's
 * target is checked once every operand is decoded). Fills in the default
 * double buffering.
 */
static int check_memory_fields(struct tpu_plan *plan, unsigned int i,
			       struct tpu_job_result *res)
{
	struct tpu_plan_operand *o = &plan->operand[i];
	int ret;

	if (o->role == TPU_ROLE_SCALAR_PREFETCH) {
		if (o->space || o->buffers || o->alias || o->revisit)
			return tpu_check_error(res, "operand %u: space, buffers, alias and revisit must be zero for scalar prefetch (it lives in SMEM)",
						i);
		return 0;
	}
	if (o->space > TPU_MEM_ANY)
		return tpu_check_error(res, "operand %u: space %u: an operand lives in VMEM (0), SMEM (1) or ANY (2)",
					i, o->space);
	if (o->space != TPU_MEM_VMEM && o->buffers)
		return tpu_check_error(res, "operand %u: buffers %u: pl.Buffered applies to VMEM blocks only, this operand is in %s",
					i, o->buffers, space_name[o->space]);
	if (o->buffers > TPU_JOB_MAX_BUFFERS)
		return tpu_check_error(res, "operand %u: buffers %u: pl.Buffered(n) takes 1 to %d",
					i, o->buffers, TPU_JOB_MAX_BUFFERS);
	ret = check_revisit(o, i, res);
	if (ret)
		return ret;
	if (o->space == TPU_MEM_VMEM && !o->buffers)
		o->buffers = 2;
	if (o->alias && o->role != TPU_ROLE_OUTPUT)
		return tpu_check_error(res, "operand %u: alias %u: only an output aliases an input",
					i, o->alias);
	return 0;
}

/* pl.Element dimensions: of blocked operands, below the rank, padded alone. */
static int check_element_dims(const struct tpu_plan_operand *o, unsigned int i,
			      bool unblocked, struct tpu_job_result *res)
{
	if (o->element_dims && unblocked)
		return tpu_check_error(res, "operand %u: element_dims 0x%x: %s has no blocks to index by element",
					i, o->element_dims,
					o->role == TPU_ROLE_SCALAR_PREFETCH ?
					"scalar prefetch" : "an operand in space ANY");
	if (o->element_dims >> o->rank)
		return tpu_check_error(res, "operand %u: element_dims 0x%x names dimensions beyond rank %u",
					i, o->element_dims, o->rank);
	for (unsigned int d = 0; d < TPU_JOB_MAX_RANK; d++)
		if (o->element_pad[d] && !(o->element_dims >> d & 1))
			return tpu_check_error(res, "operand %u: element_pad[%u] %u: padding is of element dimensions only (element_dims 0x%x)",
						i, d, o->element_pad[d], o->element_dims);
	return 0;
}

static int decode_operand(struct tpu_plan *plan, unsigned int i,
			  const struct tpu_job_operand *raw,
			  struct tpu_job_result *res)
{
	struct tpu_plan_operand *o = &plan->operand[i];
	bool prefetch = i < plan->num_scalar_prefetch;
	bool unblocked;
	int ret;

	res->error.operand = i;
	o->slot = le32(raw->slot);
	o->role = raw->role;
	o->dtype = raw->dtype;
	o->rank = raw->rank;
	o->offset = le64(raw->offset);
	o->index_map = tpu_check_decode_prog(&raw->index_map);
	o->space = raw->space;
	o->buffers = raw->buffers;
	o->alias = raw->alias;
	o->element_dims = raw->element_dims;
	o->revisit = raw->revisit;
	for (unsigned int d = 0; d < TPU_JOB_MAX_RANK; d++)
		o->element_pad[d] = le16(raw->element_pad[d]);
	if (raw->index_map.reserved || raw->reserved2)
		return tpu_check_error(res, "operand %u: reserved fields must be zero",
					i);
	if (o->slot >= TPU_JOB_MAX_SLOTS)
		return tpu_check_error(res, "operand %u: slot %u, at most %d slots", i,
					o->slot, TPU_JOB_MAX_SLOTS);
	if (o->role > TPU_ROLE_OUTPUT)
		return tpu_check_error(res, "operand %u: role %u unknown", i, o->role);
	if (prefetch != (o->role == TPU_ROLE_SCALAR_PREFETCH))
		return tpu_check_error(res, "operand %u: role %u, but the first num_scalar_prefetch (%u) operands and only they are scalar prefetch",
					i, o->role, plan->num_scalar_prefetch);
	if (!tpu_dtype_size(o->dtype))
		return tpu_check_error(res, "operand %u: dtype %u unknown",
					i, o->dtype);
	/* SMEM words: the scalar core's integers, or floats the vector unit reads */
	if (prefetch && o->dtype != TPU_DTYPE_INT32 && o->dtype != TPU_DTYPE_F32)
		return tpu_check_error(res, "operand %u: dtype %s, scalar prefetch must be int32 or float32%s",
					i, tpu_dtype_name(o->dtype),
					o->dtype == TPU_DTYPE_UINT32 ?
					" (the scalar core's words are signed: bitcast uint32 to int32)" : "");
	if (o->rank < 1 || o->rank > TPU_JOB_MAX_RANK)
		return tpu_check_error(res, "operand %u: rank %u, must be 1 to %d",
					i, o->rank, TPU_JOB_MAX_RANK);
	ret = check_memory_fields(plan, i, res);
	if (ret)
		return ret;
	unblocked = prefetch || o->space == TPU_MEM_ANY;
	ret = check_element_dims(o, i, unblocked, res);
	if (ret)
		return ret;
	for (unsigned int d = 0; d < TPU_JOB_MAX_RANK; d++) {
		o->shape[d] = le64(raw->shape[d]);
		o->block[d] = le32(raw->block[d]);
		if (d >= o->rank) {
			if (o->shape[d] || o->block[d])
				return tpu_check_error(res, "operand %u: shape[%u]/block[%u] must be zero beyond rank",
							i, d, d);
			continue;
		}
		if (o->shape[d] < 1 || o->shape[d] > TPU_JOB_MAX_ARRAY_DIM)
			return tpu_check_error(res, "operand %u: shape[%u] %llu, must be 1 to %llu",
						i, d, (unsigned long long)o->shape[d],
						(unsigned long long)TPU_JOB_MAX_ARRAY_DIM);
		if (unblocked ? o->block[d] != 0 :
		    (o->block[d] < 1 || o->block[d] > TPU_JOB_MAX_DIM))
			return tpu_check_error(res, "operand %u: block[%u] %u, must be %s",
						i, d, o->block[d],
						prefetch ? "0 for scalar prefetch" :
						unblocked ? "0 in space ANY (no blocks)" :
						"1 to 2^31");
	}
	derive_operand(o);
	if (unblocked) {
		if (o->index_map.len)
			return tpu_check_error(res, "operand %u: %s has no index map",
						i, prefetch ? "scalar prefetch" :
						"an operand in space ANY");
		return 0;
	}
	return check_prog(plan, o->index_map, o->rank, res, "operand", i,
			  "index map", -1);
}

/* input_output_aliases: each output's alias names an input with its array. */
static int check_aliases(const struct tpu_plan *plan, struct tpu_job_result *res)
{
	uint64_t aliased = 0;		/* bit a: input a has its output */

	for (unsigned int i = 0; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i], *in;
		unsigned int a = o->alias - 1u;

		if (!o->alias)
			continue;
		res->error.operand = i;
		if (a >= plan->num_operands || plan->operand[a].role != TPU_ROLE_INPUT)
			return tpu_check_error(res, "operand %u: alias %u names operand %u, which is %s, not an input",
						i, o->alias, a,
						a >= plan->num_operands ? "past num_operands" :
						plan->operand[a].role == TPU_ROLE_OUTPUT ?
						"an output" : "scalar prefetch");
		in = &plan->operand[a];
		if (in->slot != o->slot || in->offset != o->offset ||
		    in->dtype != o->dtype || in->rank != o->rank ||
		    memcmp(in->shape, o->shape, sizeof(o->shape)))
			return tpu_check_error(res, "operand %u: aliases input %u but their arrays differ (slot, offset, dtype or shape): an alias is the same array",
						i, a);
		if (aliased >> a & 1)
			return tpu_check_error(res, "operand %u: input %u is already aliased by another output",
						i, a);
		aliased |= 1ull << a;
	}
	res->error.operand = UINT32_MAX;
	return 0;
}

static int decode_scratch(struct tpu_plan *plan, unsigned int i,
			  const struct tpu_job_scratch *raw,
			  struct tpu_job_result *res)
{
	struct tpu_plan_scratch *s = &plan->scratch[i];
	uint64_t elems = 1;

	s->space = raw->space;
	s->dtype = raw->dtype;
	s->rank = raw->rank;
	if (raw->reserved0 || !tpu_check_all_zero(raw->reserved1, sizeof(raw->reserved1)))
		return tpu_check_error(res, "scratch %u: reserved fields must be zero",
					i);
	if (s->space >= TPU_MEM_COUNT || s->space == TPU_MEM_ANY)
		return tpu_check_error(res, "scratch %u: space %u: scratch lives in VMEM (0), SMEM (1) or is semaphores (3 DMA, 4 regular)",
					i, s->space);
	if (!tpu_dtype_size(s->dtype))
		return tpu_check_error(res, "scratch %u: dtype %u unknown",
					i, s->dtype);
	if (s->rank < 1 || s->rank > TPU_JOB_MAX_RANK)
		return tpu_check_error(res, "scratch %u: rank %u, must be 1 to %d",
					i, s->rank, TPU_JOB_MAX_RANK);
	for (unsigned int d = 0; d < TPU_JOB_MAX_RANK; d++) {
		s->shape[d] = le32(raw->shape[d]);
		if (d >= s->rank ? s->shape[d] != 0 :
		    (s->shape[d] < 1 || s->shape[d] > TPU_JOB_MAX_DIM))
			return tpu_check_error(res, "scratch %u: shape[%u] %u out of range",
						i, d, s->shape[d]);
		if (d < s->rank)
			elems = mul_sat(elems, s->shape[d]);
	}
	s->cols = s->shape[s->rank - 1];
	s->rows = (int64_t)(elems / (uint64_t)s->cols);
	s->bytes = mul_sat(elems, tpu_dtype_size(s->dtype));
	if (s->space < TPU_MEM_SEM_DMA)
		return 0;
	if (s->dtype != TPU_DTYPE_INT32 || s->rank != 1 ||
	    s->shape[0] > TPU_JOB_MAX_SEMAPHORES)
		return tpu_check_error(res, "scratch %u: %s semaphores are an int32 array of rank 1 with 1 to %d elements (dtype %s, rank %u, shape[0] %u)",
					i, s->space == TPU_MEM_SEM_DMA ? "DMA" : "regular",
					TPU_JOB_MAX_SEMAPHORES, tpu_dtype_name(s->dtype),
					s->rank, s->shape[0]);
	s->bytes = 0;	/* semaphores take no VMEM or SMEM */
	return 0;
}

static int account_memory(struct tpu_plan *plan, const struct tpu_config *cfg,
			  struct tpu_job_result *res)
{
	uint64_t vmem = 0, smem = 0;

	for (unsigned int i = 0; i < plan->num_operands; i++) {
		struct tpu_plan_operand *o = &plan->operand[i];

		if (o->role == TPU_ROLE_SCALAR_PREFETCH) {
			o->smem_base = smem;
			smem = add_sat(smem, o->elems);
		} else if (o->space == TPU_MEM_VMEM) {
			/* pl.Buffered(n): n buffers, as Pallas allocates them */
			vmem = add_sat(vmem, mul_sat(o->buffers, o->block_bytes));
		} else if (o->space == TPU_MEM_SMEM) {
			/*
			 * pipelined: the block in use at smem_base and the
			 * next, each on whole words (tpu_smem_words_of)
			 */
			o->smem_base = smem;
			smem = add_sat(smem, mul_sat(2, tpu_smem_words_of(o->block_bytes)));
		}
	}
	plan->num_sems = 0;
	for (unsigned int i = 0; i < plan->num_scratch; i++) {
		struct tpu_plan_scratch *s = &plan->scratch[i];

		if (s->space == TPU_MEM_VMEM) {
			vmem = add_sat(vmem, s->bytes);
		} else if (s->space == TPU_MEM_SMEM) {
			s->smem_base = smem;
			smem = add_sat(smem, tpu_smem_words_of(s->bytes));
		} else {
			s->sem_base = plan->num_sems;
			plan->num_sems += s->shape[0];
		}
	}
	plan->vmem_need = vmem;
	plan->smem_words = smem;
	if (plan->vmem_limit > cfg->vmem_size)
		return tpu_check_error(res, "vmem_limit_bytes %llu: over the device's %llu bytes of VMEM",
					(unsigned long long)plan->vmem_limit,
					(unsigned long long)cfg->vmem_size);
	if (!plan->vmem_limit)
		plan->vmem_limit = cfg->vmem_limit;
	res->error.operand = UINT32_MAX;
	res->error.op = UINT32_MAX;
	if (vmem > plan->vmem_limit) {
		res->error.need = vmem;
		res->error.limit = plan->vmem_limit;
		return tpu_job_fail(res, TPU_JOB_ERR_VMEM_LIMIT,
				    "VMEM: double-buffered blocks and scratch need %llu bytes, limit is %llu (%llu over)",
				    (unsigned long long)vmem,
				    (unsigned long long)plan->vmem_limit,
				    (unsigned long long)(vmem - plan->vmem_limit));
	}
	if (mul_sat(smem, 4) > cfg->smem_size) {
		res->error.need = mul_sat(smem, 4);
		res->error.limit = cfg->smem_size;
		return tpu_job_fail(res, TPU_JOB_ERR_SMEM_LIMIT,
				    "SMEM: scalar prefetch, SMEM blocks and SMEM scratch need %llu bytes, device has %llu",
				    (unsigned long long)mul_sat(smem, 4),
				    (unsigned long long)cfg->smem_size);
	}
	return 0;
}

int tpu_job_decode(const void *desc, size_t len, const struct tpu_config *cfg,
		   struct tpu_plan *plan, struct tpu_job_result *res)
{
	const uint8_t *blob = desc;
	struct tpu_loop_nest nest = { 0 };
	struct tpu_job_header h;
	int ret;

	res->error.operand = UINT32_MAX;
	res->error.op = UINT32_MAX;
	res->error.step = UINT64_MAX;
	if (len < sizeof(h) || len > TPU_JOB_MAX_SIZE)
		return tpu_check_error(res, "total_size %zu: must be %zu to %u bytes",
					len, sizeof(h), TPU_JOB_MAX_SIZE);
	memcpy(&h, blob, sizeof(h));
	ret = decode_header(&h, len, plan, res);
	if (ret)
		return ret;
	/* Code first: every program below is verified against it. */
	for (unsigned int i = 0; i < plan->num_insns; i++) {
		struct tpu_job_insn in;

		memcpy(&in, blob + le32(h.code_offset) + i * sizeof(in), sizeof(in));
		if (in.reserved[0] || in.reserved[1] || in.reserved[2])
			return tpu_job_fail(res, TPU_JOB_ERR_BYTECODE,
					    "insn %u: reserved bytes must be zero", i);
		plan->insn[i].op = in.op;
		plan->insn[i].arg = (int32_t)le32((uint32_t)in.arg);
	}
	for (unsigned int i = 0; i < plan->num_operands; i++) {
		struct tpu_job_operand raw;

		memcpy(&raw, blob + le32(h.operands_offset) + i * sizeof(raw),
		       sizeof(raw));
		ret = decode_operand(plan, i, &raw, res);
		if (ret)
			return ret;
	}
	res->error.operand = UINT32_MAX;
	for (unsigned int i = 0; i < plan->num_scratch; i++) {
		struct tpu_job_scratch raw;

		memcpy(&raw, blob + le32(h.scratch_offset) + i * sizeof(raw),
		       sizeof(raw));
		ret = decode_scratch(plan, i, &raw, res);
		if (ret)
			return ret;
	}
	ret = check_aliases(plan, res);
	if (ret)
		return ret;
	for (unsigned int i = 0; i < plan->num_windows; i++) {
		struct tpu_job_window raw;

		memcpy(&raw, blob + le32(h.windows_offset) + i * sizeof(raw),
		       sizeof(raw));
		ret = tpu_check_window(plan, i, &raw, res);
		if (ret)
			return ret;
	}
	for (unsigned int i = 0; i < plan->num_ops; i++) {
		struct tpu_job_op raw;

		memcpy(&raw, blob + le32(h.ops_offset) + i * sizeof(raw), sizeof(raw));
		tpu_loop_nest_enter(&nest, i);
		ret = tpu_check_op(plan, i, &raw, &nest, res);
		if (ret)
			return ret;
		if (plan->op[i].opcode == TPU_OP_LOOP)
			tpu_loop_nest_open(&nest, plan, i);
	}
	return account_memory(plan, cfg, res);
}

/*
 * A buffer the device writes (the trace, TPU_JOB_F_TRACE; the prints,
 * TPU_JOB_F_PRINT): a slot of the table, in HBM, with room for its
 * header, and nobody's operand.
 */
static int check_device_slot(const struct tpu_plan *plan, unsigned int t,
			     const char *field, size_t header,
			     uint64_t hbm_size,
			     const struct tpu_buffer_slot *slots,
			     unsigned int nslots, struct tpu_job_result *res)
{
	if (t >= nslots)
		return tpu_job_fail(res, TPU_JOB_ERR_BUFFER,
				    "%s %u not in the %u-entry buffer table",
				    field, t, nslots);
	if (slots[t].offset > hbm_size || slots[t].size > hbm_size - slots[t].offset)
		return tpu_job_fail(res, TPU_JOB_ERR_BUFFER,
				    "%s %u [%#llx, +%#llx) outside HBM", field, t,
				    (unsigned long long)slots[t].offset,
				    (unsigned long long)slots[t].size);
	if (slots[t].size < header)
		return tpu_job_fail(res, TPU_JOB_ERR_BUFFER,
				    "%s %u: %llu bytes, less than the %zu-byte header",
				    field, t, (unsigned long long)slots[t].size,
				    header);
	for (unsigned int i = 0; i < plan->num_operands; i++)
		if (plan->operand[i].slot == t)
			return tpu_job_fail(res, TPU_JOB_ERR_BUFFER,
					    "%s %u is operand %u's slot too",
					    field, t, i);
	return 0;
}

static int check_device_slots(const struct tpu_plan *plan, uint64_t hbm_size,
			      const struct tpu_buffer_slot *slots,
			      unsigned int nslots, struct tpu_job_result *res)
{
	bool trace = plan->flags & TPU_JOB_F_TRACE;
	bool print = plan->flags & TPU_JOB_F_PRINT;
	int ret = 0;

	if (trace)
		ret = check_device_slot(plan, plan->trace_slot, "trace_slot",
					sizeof(struct tpu_trace_header),
					hbm_size, slots, nslots, res);
	if (!ret && print)
		ret = check_device_slot(plan, plan->print_slot, "print_slot",
					sizeof(struct tpu_print_header),
					hbm_size, slots, nslots, res);
	if (ret)
		return ret;
	if (trace && print && plan->trace_slot == plan->print_slot)
		return tpu_job_fail(res, TPU_JOB_ERR_BUFFER,
				    "print_slot %u is the trace_slot too",
				    plan->print_slot);
	return 0;
}

/* Operand @i's bytes in HBM (its slot was checked to lie inside HBM). */
static void hbm_range(const struct tpu_plan *plan, const struct tpu_buffer_slot *slots,
		      unsigned int i, uint64_t *start, uint64_t *len)
{
	const struct tpu_plan_operand *o = &plan->operand[i];

	*start = slots[o->slot].offset + o->offset;
	*len = o->elems * tpu_dtype_size(o->dtype);
}

/*
 * An output sharing bytes with another operand is only sound when declared
 * (input_output_aliases): otherwise the pipeline's write-backs race the
 * other's reads. Inputs may overlap each other.
 */
static int check_output_overlap(const struct tpu_plan *plan,
				const struct tpu_buffer_slot *slots,
				struct tpu_job_result *res)
{
	for (unsigned int i = 0; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];
		uint64_t a, alen, b, blen;

		if (o->role != TPU_ROLE_OUTPUT)
			continue;
		hbm_range(plan, slots, i, &a, &alen);
		for (unsigned int j = 0; j < plan->num_operands; j++) {
			if (j == i || o->alias == j + 1)
				continue;
			hbm_range(plan, slots, j, &b, &blen);
			if (!overlap(a, alen, b, blen))
				continue;
			res->error.operand = i;
			return tpu_job_fail(res, TPU_JOB_ERR_BUFFER,
					    "operands %u and %u share bytes of HBM: declare the alias (input_output_aliases)",
					    i < j ? i : j, i < j ? j : i);
		}
	}
	return 0;
}

int tpu_job_check_buffers(const struct tpu_plan *plan, uint64_t hbm_size,
			  const struct tpu_buffer_slot *slots,
			  unsigned int nslots, struct tpu_job_result *res)
{
	for (unsigned int i = 0; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];
		const struct tpu_buffer_slot *s;
		uint64_t need;

		res->error.operand = i;
		if (o->slot >= nslots)
			return tpu_job_fail(res, TPU_JOB_ERR_BUFFER,
					    "operand %u: slot %u not in the %u-entry buffer table",
					    i, o->slot, nslots);
		s = &slots[o->slot];
		if (s->offset > hbm_size || s->size > hbm_size - s->offset)
			return tpu_job_fail(res, TPU_JOB_ERR_BUFFER,
					    "operand %u: slot %u [%#llx, +%#llx) outside HBM",
					    i, o->slot, (unsigned long long)s->offset,
					    (unsigned long long)s->size);
		need = add_sat(o->offset, mul_sat(o->elems, tpu_dtype_size(o->dtype)));
		if (need > s->size) {
			res->error.need = need;
			res->error.limit = s->size;
			return tpu_job_fail(res, TPU_JOB_ERR_BUFFER,
					    "operand %u: array needs %llu bytes of slot %u, which has %llu",
					    i, (unsigned long long)need, o->slot,
					    (unsigned long long)s->size);
		}
	}
	res->error.operand = UINT32_MAX;
	return check_device_slots(plan, hbm_size, slots, nslots, res) ?:
	       check_output_overlap(plan, slots, res);
}
