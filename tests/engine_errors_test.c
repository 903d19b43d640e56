// SPDX-License-Identifier: MIT
/*
 * Host test: each way a job can fail gives its own error code and a message
 * that names the culprit, and a failing job writes nothing out of bounds.
 */
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "kselftest_harness.h"

FIXTURE(err) {
	struct tdev *d;
	struct mm_job j;
	struct tpu_job_result res;
	void *blob;
	size_t len;
};

FIXTURE_SETUP(err)
{
	self->d = tdev_new(4 << 20, 2);
	self->j = (struct mm_job){ .m = 64, .k = 48, .n = 32, .bm = 16, .bk = 16,
				   .bn = 16, .in_dtype = TPU_DTYPE_F32,
				   .out_dtype = TPU_DTYPE_F32, .acc_scratch = true };
	self->j.x_slot = tdev_alloc(self->d, 64 * 48 * 4);
	self->j.y_slot = tdev_alloc(self->d, 48 * 32 * 4);
	self->j.z_slot = tdev_alloc(self->d, 64 * 32 * 4);
	self->blob = mm_build(&self->j, &self->len);
}

FIXTURE_TEARDOWN(err)
{
	free(self->blob);
	tdev_free(self->d);
}

static int run(struct _test_data_err *self)
{
	/* big blocks: the schedule and checks matter here, not the data */
	unsigned int flags = self->j.bm >= 1024 ? TPU_RUN_MODEL_ONLY : 0;

	return tdev_run(self->d, self->blob, self->len, flags, &self->res);
}

static void rebuild(struct _test_data_err *self)
{
	free(self->blob);
	self->blob = mm_build(&self->j, &self->len);
}

#define EXPECT_ERROR(want, text) do {						\
	EXPECT_EQ(want, run(self)) TH_LOG("%s", self->res.message);		\
	EXPECT_EQ(want, self->res.error.code);					\
	EXPECT_NE(NULL, strstr(self->res.message, text))			\
		TH_LOG("message \"%s\" lacks \"%s\"", self->res.message, text);	\
} while (0)

TEST_F(err, baseline_runs)
{
	EXPECT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
}

TEST_F(err, vmem_over_limit_gives_need_and_limit)
{
	self->j.bm = self->j.bk = self->j.bn = 1024;	/* 2*3*4 MiB + 4 MiB */
	rebuild(self);
	EXPECT_ERROR(TPU_JOB_ERR_VMEM_LIMIT, "over");
	EXPECT_EQ(28ull << 20, self->res.error.need);
	EXPECT_EQ(16ull << 20, self->res.error.limit);
	EXPECT_NE(NULL, strstr(self->res.message, "29360128"));
	/* vmem_limit_bytes raises it, up to the physical VMEM */
	jb_header(self->blob)->vmem_limit_bytes = 28ull << 20;
	EXPECT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	jb_header(self->blob)->vmem_limit_bytes = (28ull << 20) - 1;
	EXPECT_ERROR(TPU_JOB_ERR_VMEM_LIMIT, "1 over");
	jb_header(self->blob)->vmem_limit_bytes = (128ull << 20) + 1;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "vmem_limit_bytes");
}

/*
 * Point operand @i's index map at a new program appended to the code array,
 * the blob's last section.
 */
static void set_map(struct _test_data_err *self, unsigned int i, const char *prog)
{
	struct jb *b = jb_new();
	struct tpu_job_prog p = jb_prog(b, prog);
	size_t len, at = self->len, add = p.len * sizeof(struct tpu_job_insn);
	uint8_t *tmp = jb_finish(b, &len);
	struct tpu_job_header *h;
	struct tpu_job_operand *o;

	self->blob = realloc(self->blob, at + add);
	memcpy((uint8_t *)self->blob + at, tmp + jb_header(tmp)->code_offset, add);
	h = jb_header(self->blob);
	o = (void *)((uint8_t *)self->blob + h->operands_offset);
	o[i].index_map.offset = h->num_insns;
	o[i].index_map.len = p.len;
	h->num_insns += p.len;
	h->total_size = self->len = at + add;
	free(tmp);
	jb_free(b);
}

TEST_F(err, out_of_bounds_block_names_operand_step_and_block)
{
	float *z = tdev_ptr(self->d, self->j.z_slot);

	memset(z, 0x5c, 64 * 32 * 4);
	set_map(self, 0, "pid0 1 + pid2");	/* x block (i+1, k): off the end */
	EXPECT_ERROR(TPU_JOB_ERR_BLOCK_OOB, "operand 0");
	EXPECT_EQ(0, self->res.error.operand);
	EXPECT_EQ(4, self->res.error.block[0]);
	/* step (3, 0, 0) is number 3*2*3 = 18 in row-major order */
	EXPECT_EQ(18, self->res.error.step);
	EXPECT_NE(NULL, strstr(self->res.message, "(4, 0)")) TH_LOG("%s", self->res.message);
	set_map(self, 0, "pid0 -1 * pid2");
	EXPECT_ERROR(TPU_JOB_ERR_BLOCK_OOB, "(-1, 0)");
	set_map(self, 0, "pid0 pid2");
	set_map(self, 2, "pid1 pid0");	/* z: 4 row blocks, 2 col blocks */
	EXPECT_ERROR(TPU_JOB_ERR_BLOCK_OOB, "operand 2");
}

TEST_F(err, failed_job_writes_nothing_out_of_bounds)
{
	uint8_t *hbm = self->d->hbm;
	uint8_t *copy = malloc(self->d->hbm_size);

	memcpy(copy, hbm, self->d->hbm_size);
	set_map(self, 2, "pid0 pid1 1 +");	/* z: column block 2 of 2 */
	EXPECT_ERROR(TPU_JOB_ERR_BLOCK_OOB, "operand 2");
	/* the first bad step is the first that opens block (0, 2): nothing
	 * after z's buffer changed */
	EXPECT_EQ(0, memcmp(copy + self->d->slots[2].offset + self->d->slots[2].size,
			    hbm + self->d->slots[2].offset + self->d->slots[2].size,
			    self->d->hbm_size - self->d->slots[2].offset -
			    self->d->slots[2].size));
	free(copy);
}

TEST_F(err, bad_bytecode)
{
	set_map(self, 1, "pid2 +");
	EXPECT_ERROR(TPU_JOB_ERR_BYTECODE, "underflow");
	set_map(self, 1, "pid7 0");
	EXPECT_ERROR(TPU_JOB_ERR_BYTECODE, "grid dimension 7");
	set_map(self, 1, "pid1");
	EXPECT_ERROR(TPU_JOB_ERR_BYTECODE, "leaves 1 values, 2 needed");
	set_map(self, 1, "0 smem0");
	EXPECT_ERROR(TPU_JOB_ERR_BYTECODE, "not scalar prefetch");
	set_map(self, 1, "pid2 pid1");
	((struct tpu_job_insn *)((uint8_t *)self->blob +
				 jb_header(self->blob)->code_offset))[0].op = 99;
	EXPECT_ERROR(TPU_JOB_ERR_BYTECODE, "unknown op 99");
}

TEST_F(err, division_by_zero_at_run_time)
{
	set_map(self, 1, "pid2 pid1 1 pid0 - //");	/* 1 - i == 0 at i == 1 */
	EXPECT_ERROR(TPU_JOB_ERR_DIV_ZERO, "division by zero");
	EXPECT_EQ(6, self->res.error.step);
	EXPECT_EQ(1, self->res.error.operand);
}

TEST_F(err, smem_load_out_of_range)
{
	struct jb *b = jb_new();
	uint64_t s1[1] = { 4 }, xs[1] = { 64 };
	uint32_t xb[1] = { 16 }, grid[1] = { 4 };
	unsigned int s = tdev_alloc(self->d, 16), x = tdev_alloc(self->d, 256);
	unsigned int z = tdev_alloc(self->d, 256);

	memcpy(tdev_ptr(self->d, s), (int32_t[4]){ 0, 1, 2, 9 }, 16);
	jb_grid(b, 1, grid, "p");
	jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, s, TPU_DTYPE_INT32, 1, s1, NULL, NULL);
	jb_operand(b, TPU_ROLE_INPUT, x, TPU_DTYPE_F32, 1, xs, xb, "pid0 smem0");
	/* x's block index comes from s; z's reads s one past its end */
	jb_operand(b, TPU_ROLE_OUTPUT, z, TPU_DTYPE_F32, 1, xs, xb, "pid0 1 + smem0 0 *");
	jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(2), JB_OPND(1), NULL);
	free(self->blob);
	self->blob = jb_finish(b, &self->len);
	jb_free(b);
	EXPECT_ERROR(TPU_JOB_ERR_SMEM_RANGE, "SMEM index 4");
	EXPECT_EQ(2, self->res.error.operand);
}

/* A broadcast index past an SMEM scratch names the scratch, not an operand. */
TEST_F(err, bcast_index_outside_smem_scratch)
{
	struct jb *b = jb_new();
	uint64_t xs[1] = { 64 };
	uint32_t xb[1] = { 16 }, grid[1] = { 4 }, ss[1] = { 8 };
	uint64_t s1[1] = { 2 };
	unsigned int s = tdev_alloc(self->d, 8), x = tdev_alloc(self->d, 256);
	unsigned int z = tdev_alloc(self->d, 256);
	struct tpu_job_op *op;

	jb_grid(b, 1, grid, "p");
	jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, s, TPU_DTYPE_INT32, 1, s1, NULL, NULL);
	jb_operand(b, TPU_ROLE_INPUT, x, TPU_DTYPE_F32, 1, xs, xb, "pid0");
	jb_operand(b, TPU_ROLE_OUTPUT, z, TPU_DTYPE_F32, 1, xs, xb, "pid0");
	jb_scratch(b, TPU_MEM_SMEM, TPU_DTYPE_F32, 1, ss);
	op = jb_binary(b, TPU_BINARY_ADD, TPU_BCAST_SMEM, JB_OPND(2), JB_OPND(1),
		       JB_SCR(0), NULL);
	op->scalar_index = jb_prog(b, "8");
	free(self->blob);
	self->blob = jb_finish(b, &self->len);
	jb_free(b);
	EXPECT_ERROR(TPU_JOB_ERR_SMEM_RANGE, "SMEM index 8 outside SMEM scratch 0 (8 elements)");
	EXPECT_EQ(NULL, strstr(self->res.message, "scalar-prefetch"));
	EXPECT_EQ(0, self->res.error.op);
}

TEST_F(err, buffers_checked_against_the_table)
{
	self->d->slots[self->j.y_slot].size -= 1;
	EXPECT_ERROR(TPU_JOB_ERR_BUFFER, "operand 1");
	EXPECT_EQ(48 * 32 * 4, self->res.error.need);
	self->d->slots[self->j.y_slot].size += 1;
	self->d->nslots = 2;
	EXPECT_ERROR(TPU_JOB_ERR_BUFFER, "slot 2 not in");
	self->d->nslots = 3;
	self->d->slots[0].offset = self->d->hbm_size - 16;
	EXPECT_ERROR(TPU_JOB_ERR_BUFFER, "outside HBM");
}

TEST_F(err, smem_over_device_size)
{
	struct jb *b = jb_new();
	uint64_t n[1] = { 1024 }, xs[1] = { 64 };
	uint32_t xb[1] = { 16 }, grid[1] = { 4 };
	unsigned int s = tdev_alloc(self->d, 4096), x = tdev_alloc(self->d, 256);

	jb_grid(b, 1, grid, "p");
	jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, s, TPU_DTYPE_INT32, 1, n, NULL, NULL);
	jb_operand(b, TPU_ROLE_OUTPUT, x, TPU_DTYPE_F32, 1, xs, xb, "pid0");
	jb_zero(b, JB_OPND(1), NULL);
	free(self->blob);
	self->blob = jb_finish(b, &self->len);
	jb_free(b);
	EXPECT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	self->d->cfg.smem_size = 4095;
	tdev_reconfigure(self->d);
	EXPECT_ERROR(TPU_JOB_ERR_SMEM_LIMIT, "4096");
}

TEST_F(err, bad_descriptor_fields)
{
	struct tpu_job_header *h = jb_header(self->blob);
	struct tpu_job_header saved = *h;
	struct tpu_job_operand *o = (void *)((uint8_t *)self->blob + h->operands_offset);
	struct tpu_job_op *op = (void *)((uint8_t *)self->blob + h->ops_offset);
	struct tpu_job_operand osaved = o[0], osaved1 = o[1];
	struct tpu_job_op opsaved = op[1];

	h->magic = 0;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "magic");
	*h = saved, h->version = 2;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "version");
	*h = saved, h->total_size += 8;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "total_size");
	*h = saved, h->flags = 0x80;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "flags");
	*h = saved, h->reserved2[1] = 1;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "reserved");
	*h = saved, h->grid_rank = 5;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "grid_rank");
	*h = saved, h->grid[1] = 0;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "grid[1]");
	*h = saved, h->grid[3] = 1;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "grid[3]");
	*h = saved, h->dim_semantics[0] = 7;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "dim_semantics[0]");
	*h = saved, h->ops_offset = h->operands_offset;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "overlaps");
	*h = saved, h->code_offset = h->total_size;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "code_offset");
	*h = saved, h->num_scalar_prefetch = 1;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "scalar prefetch");
	*h = saved;

	o[0].dtype = 9;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "operand 0: dtype");
	o[0] = osaved, o[0].block[0] = 0;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "block[0]");
	o[0] = osaved, o[0].shape[2] = 1;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "beyond rank");
	o[0] = osaved, o[0].reserved2 = 1;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "reserved");
	o[0] = osaved, o[0].slot = 64;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "slot 64");
	o[0] = osaved;

	/* op 1 is the dot: acc += x @ y */
	op[1].dst = (struct tpu_job_ref){ TPU_REF_OPERAND, 0 };
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "read-only");
	op[1] = opsaved, op[1].dot |= TPU_DOT_RHS_CONTRACT_1;	/* 16x16 still fits */
	EXPECT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	op[1] = opsaved, op[1].src1 = (struct tpu_job_ref){ TPU_REF_SCRATCH, 0 };
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "not be one of its sources");
	op[1] = opsaved, o[1].dtype = TPU_DTYPE_BF16;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "dot of dtypes");
	o[1] = osaved1;
	op[1] = opsaved, op[1].opcode = 42;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "opcode 42");
	op[1] = opsaved, op[1].reserved1[1] = 1;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "op 1: reserved");
	op[1] = opsaved;
	EXPECT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
}

TEST_F(err, dot_shape_mismatch)
{
	self->j.transpose_rhs = true;
	self->j.bn = 8;		/* y block (8, 16) with x @ y.T: fine */
	rebuild(self);
	EXPECT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	{
		struct tpu_job_header *h = jb_header(self->blob);
		struct tpu_job_op *op = (void *)((uint8_t *)self->blob + h->ops_offset);

		op[1].dot &= ~TPU_DOT_RHS_CONTRACT_1;	/* contract 16 with 8 */
	}
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "contraction sizes differ");
}

/*
 * A body of TPU_JOB_MAX_OPS ops, each under a predicate and every other one
 * adding a scalar-core value (more code than the 4096 instructions the
 * code array held before), runs; one more op is refused by name.
 */
TEST_F(err, body_of_max_ops_runs_one_more_is_refused)
{
	uint64_t zs[2] = { 8, 128 };
	uint32_t zb[2] = { 8, 128 }, grid[1] = { 2 };
	unsigned int z = tdev_alloc(self->d, 8 * 128 * 4);
	struct jb *b = jb_new();
	struct tpu_job_op *op;
	const float *out;
	float one = 1.0f;

	jb_grid(b, 1, grid, "a");
	jb_operand(b, TPU_ROLE_OUTPUT, z, TPU_DTYPE_F32, 2, zs, zb, "0 0");
	jb_zero(b, JB_OPND(0), "pid0 0 ==");
	for (unsigned int i = 1; i < TPU_JOB_MAX_OPS; i++) {
		op = jb_binary(b, TPU_BINARY_ADD, i % 2 ? TPU_BCAST_IMM : TPU_BCAST_SCALAR,
			       JB_OPND(0), JB_OPND(0), JB_NONE, "pid0 0 >=");
		if (i % 2)
			memcpy(&op->imm, &one, sizeof(one));
		else
			op->scalar_index = jb_prog(b, "pid0 0 * 1 +");
	}
	free(self->blob);
	self->blob = jb_finish(b, &self->len);
	EXPECT_EQ(TPU_JOB_MAX_OPS, jb_header(self->blob)->num_ops);
	EXPECT_LT(4096, jb_header(self->blob)->num_insns);
	EXPECT_EQ(0, run(self)) TH_LOG("%s", self->res.message);
	out = tdev_ptr(self->d, z);
	for (unsigned int e = 0; e < 8 * 128; e++) {
		ASSERT_EQ(2.0f * (TPU_JOB_MAX_OPS - 1), out[e]) TH_LOG("element %u", e);
	}

	jb_zero(b, JB_OPND(0), NULL);
	free(self->blob);
	self->blob = jb_finish(b, &self->len);
	jb_free(b);
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "num_ops 2049: at most 2048");
}

TEST_F(err, truncated_blob)
{
	self->len = 40;
	EXPECT_ERROR(TPU_JOB_ERR_DESCRIPTOR, "total_size");
}

TEST_HARNESS_MAIN
