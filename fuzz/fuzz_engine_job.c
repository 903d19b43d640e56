// SPDX-License-Identifier: MIT
/*
 * Whole jobs on the engine: a template job from tests/job_builder
 * (fuzz_jobs.c), patched by the fuzzer's bytes, so that most inputs still
 * decode and reach execution. Each job that decodes within the size bounds
 * runs model-only (no HBM), then for real on a tiny HBM on a 1-core and a
 * 2-core engine. Beyond the sanitizers: no job fails for the device's own
 * reasons, both real runs agree where the engine promises bit-identical
 * results for any core count (see run_real), and nothing outside the job's
 * output arrays and its trace buffer (TPU_JOB_F_TRACE) changes.
 *
 * Input: template index, HBM fill, then 3-byte patches (u16 offset modulo
 * the blob's length, the byte to write there).
 */
#include "fuzz_input.h"
#include "fuzz_jobs.h"
#include "tpu_dtype.h"
#include "tpu_engine.h"
#include "job_builder.h"

/* Bounds that keep a run in the milliseconds. */
#define MAX_STEPS	256
#define MAX_BLOCK_BYTES	4096
#define MAX_TRIPS	16	/* of each loop, known before the job runs */

static struct tpu_engine *engine[2];
static uint8_t *hbm[2], *hbm_before;
static struct tpu_plan plan;
static bool verbose;	/* FUZZ_VERBOSE=1: say what each run did */

static void setup(void)
{
	char err[128];

	for (unsigned int c = 0; c < 2; c++) {
		struct tpu_config cfg;

		tpu_config_defaults(&cfg);
		cfg.cores = c + 1;
		engine[c] = tpu_engine_create(&cfg, err, sizeof(err));
		FUZZ_ASSERT(engine[c], "engine: %s", err);
		hbm[c] = malloc(FUZZ_HBM_SIZE);
	}
	verbose = getenv("FUZZ_VERBOSE");
	hbm_before = malloc(FUZZ_HBM_SIZE);
}

/* Zeros, small integers, ones, or bytes from a seed: data for every dtype. */
static void fill_hbm(uint8_t kind)
{
	uint32_t x = kind * 2654435761u + 1;

	for (uint32_t i = 0; i < FUZZ_HBM_SIZE / 4; i++) {
		uint32_t w;

		switch (kind % 4) {
		case 0: w = 0; break;
		case 1: w = i % 3; break;
		case 2: w = 0x3f800000; break;	/* 1.0f */
		default: x = x * 1103515245u + 12345; w = x; break;
		}
		memcpy(hbm_before + 4 * i, &w, 4);
	}
	memcpy(hbm[0], hbm_before, FUZZ_HBM_SIZE);
	memcpy(hbm[1], hbm_before, FUZZ_HBM_SIZE);
}

/*
 * Loops whose work is bounded before the job runs: constant bounds, or a
 * while loop's small maximum (the device's own bound is a reset, which
 * the fuzzer does not send).
 */
static bool loops_bounded(void)
{
	for (unsigned int n = 0; n < plan.num_ops; n++) {
		const struct tpu_plan_op *op = &plan.op[n];
		const struct tpu_plan_insn *in;

		if (op->opcode != TPU_OP_LOOP)
			continue;
		in = &plan.insn[op->scalar_index.offset];	/* decoded: in bounds */
		if (op->fn == TPU_LOOP_WHILE) {
			if (!op->imm2 || op->imm2 > MAX_TRIPS)
				return false;
			continue;
		}
		if (op->scalar_index.len != 2 || in[0].op != TPU_INSN_PUSH_CONST ||
		    in[1].op != TPU_INSN_PUSH_CONST ||
		    (int64_t)in[1].arg - in[0].arg > MAX_TRIPS)
			return false;
	}
	return true;
}

/* Decodes, fits the buffer table, and is small enough to run here. */
static bool runnable(const void *blob, size_t len,
		     const struct tpu_buffer_slot *slots)
{
	struct tpu_job_result res = { 0 };
	struct tpu_config cfg;

	tpu_config_defaults(&cfg);
	if (tpu_job_decode(blob, len, &cfg, &plan, &res) ||
	    tpu_job_check_buffers(&plan, FUZZ_HBM_SIZE, slots, FUZZ_NSLOTS, &res))
		return false;
	if (plan.steps > MAX_STEPS || !loops_bounded())
		return false;
	for (unsigned int i = 0; i < plan.num_operands; i++)
		if (plan.operand[i].block_bytes > MAX_BLOCK_BYTES)
			return false;
	for (unsigned int i = 0; i < plan.num_scratch; i++)
		if (plan.scratch[i].bytes > MAX_BLOCK_BYTES)
			return false;
	return true;
}

static int run(unsigned int c, const void *blob, size_t len, void *mem,
	       unsigned int flags, const struct tpu_buffer_slot *slots)
{
	struct tpu_job_result res;
	int ret = tpu_engine_run(engine[c], blob, len, mem, FUZZ_HBM_SIZE, slots,
				 FUZZ_NSLOTS, flags, &res);

	if (verbose)
		fprintf(stderr, "fuzz: %u core(s)%s: %s, %llu steps: %s\n", c + 1,
			flags ? " model-only" : "", tpu_job_error_name(ret),
			(unsigned long long)res.stats.steps, res.message);
	FUZZ_ASSERT(ret == (int)res.error.code, "returned %d, code %u", ret,
		    res.error.code);
	FUZZ_ASSERT(memchr(res.message, 0, sizeof(res.message)),
		    "message not terminated");
	FUZZ_ASSERT(ret != TPU_JOB_ERR_INTERNAL && ret != TPU_JOB_ERR_ABORTED &&
		    ret <= TPU_JOB_ERR_LOOP, "%d cores%s: %s: %s", c + 1,
		    flags ? " model-only" : "", tpu_job_error_name(ret), res.message);
	return ret;
}

/* Is HBM byte @at inside the job's trace buffer? */
static bool in_trace(uint64_t at, const struct tpu_buffer_slot *slots)
{
	const struct tpu_buffer_slot *t = &slots[plan.trace_slot];

	return (plan.flags & TPU_JOB_F_TRACE) && at >= t->offset &&
	       at - t->offset < t->size;
}

/* Is HBM byte @at inside the job's print buffer (TPU_JOB_F_PRINT)? */
static bool in_print(uint64_t at, const struct tpu_buffer_slot *slots)
{
	const struct tpu_buffer_slot *t = &slots[plan.print_slot];

	return (plan.flags & TPU_JOB_F_PRINT) && at >= t->offset &&
	       at - t->offset < t->size;
}

/* Is HBM byte @at inside one of the job's output arrays? */
static bool in_output(uint64_t at, const struct tpu_buffer_slot *slots)
{
	for (unsigned int i = 0; i < plan.num_operands; i++) {
		const struct tpu_plan_operand *o = &plan.operand[i];
		uint64_t start = slots[o->slot].offset + o->offset;

		if (o->role == TPU_ROLE_OUTPUT && at >= start &&
		    at - start < o->elems * tpu_dtype_size(o->dtype))
			return true;
	}
	return false;
}

/* HBM bytes of operand @i's array. */
static void array_range(unsigned int i, const struct tpu_buffer_slot *slots,
			uint64_t *start, uint64_t *end)
{
	const struct tpu_plan_operand *o = &plan.operand[i];

	*start = slots[o->slot].offset + o->offset;
	*end = *start + o->elems * tpu_dtype_size(o->dtype);
}

/*
 * An output array overlapping another operand's: nothing forbids it, but
 * then the cores race on those bytes and results depend on timing.
 */
static bool outputs_alias(const struct tpu_buffer_slot *slots)
{
	for (unsigned int i = 0; i < plan.num_operands; i++) {
		uint64_t s0, e0, s1, e1;

		if (plan.operand[i].role != TPU_ROLE_OUTPUT)
			continue;
		array_range(i, slots, &s0, &e0);
		for (unsigned int j = 0; j < plan.num_operands; j++) {
			array_range(j, slots, &s1, &e1);
			if (j != i && s0 < e1 && s1 < e0)
				return true;
		}
	}
	return false;
}

static void check_untouched(unsigned int c, const struct tpu_buffer_slot *slots)
{
	for (uint64_t at = 0; at < FUZZ_HBM_SIZE; at++)
		if (hbm[c][at] != hbm_before[at])
			FUZZ_ASSERT(in_output(at, slots) || in_trace(at, slots) ||
				    in_print(at, slots),
				    "%u cores wrote HBM byte %#llx, outside every output, the trace and the prints",
				    c + 1, (unsigned long long)at);
}

/*
 * Run on both engines from the same HBM. Only debug-mode results are
 * compared: without it, an output block the body leaves unwritten holds
 * whatever the core's VMEM buffer held, and that depends on the split.
 * Nor are jobs whose outputs alias another operand's array, nor jobs with
 * scratch: a body may carry scratch across parallel iterations (an
 * accumulator it never zeroes), and each core has its own.
 */
static void run_real(uint8_t *blob, size_t len, uint8_t fill,
		     const struct tpu_buffer_slot *slots)
{
	bool debug = plan.flags & TPU_JOB_F_DEBUG;
	int r1, r2;

	fill_hbm(fill);
	r1 = run(0, blob, len, hbm[0], 0, slots);
	r2 = run(1, blob, len, hbm[1], 0, slots);
	check_untouched(0, slots);
	check_untouched(1, slots);
	if (!debug || outputs_alias(slots) || plan.num_scratch)
		return;
	FUZZ_ASSERT(!r1 == !r2, "1 core: %s, 2 cores: %s", tpu_job_error_name(r1),
		    tpu_job_error_name(r2));
	if (r1)
		return;
	/* a trace holds each core's records and host times: not compared */
	if (plan.flags & TPU_JOB_F_TRACE)
		for (unsigned int c = 0; c < 2; c++)
			memset(hbm[c] + slots[plan.trace_slot].offset, 0,
			       slots[plan.trace_slot].size);
	/* prints carry the core and interleave by core: not compared */
	if (plan.flags & TPU_JOB_F_PRINT)
		for (unsigned int c = 0; c < 2; c++)
			memset(hbm[c] + slots[plan.print_slot].offset, 0,
			       slots[plan.print_slot].size);
	FUZZ_ASSERT(!memcmp(hbm[0], hbm[1], FUZZ_HBM_SIZE),
		    "1 and 2 cores leave different HBM");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_input in = { data, size, 0 };
	struct tpu_buffer_slot slots[FUZZ_NSLOTS];
	unsigned int t = fuzz_u8(&in) % fuzz_num_templates();
	uint8_t fill = fuzz_u8(&in);
	uint8_t *blob;
	size_t len;

	if (!engine[0])
		setup();
	fuzz_slots(slots);
	blob = fuzz_template(t, &len);
	while (fuzz_left(&in) >= 3) {
		uint16_t at = fuzz_u16(&in);

		blob[at % len] = fuzz_u8(&in);
		if (verbose)
			fprintf(stderr, "fuzz: %s: byte %zu := %#x\n",
				fuzz_template_name(t), at % len, blob[at % len]);
	}
	if (!runnable(blob, len, slots)) {
		free(blob);
		return -1;	/* not worth adding to the corpus */
	}
	run(0, blob, len, NULL, TPU_RUN_MODEL_ONLY, slots);
	run_real(blob, len, fill, slots);
	if (!(plan.flags & TPU_JOB_F_DEBUG)) {
		jb_header(blob)->flags |= TPU_JOB_F_DEBUG;
		plan.flags |= TPU_JOB_F_DEBUG;
		run_real(blob, len, fill, slots);
	}
	free(blob);
	return 0;
}
