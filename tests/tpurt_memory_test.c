// SPDX-License-Identifier: MIT
/*
 * Host test: the Pallas TPU memory model in libtpurt. Statements with
 * windows, async copies, semaphores, SMEM stores and run_scoped lower to
 * the expected ops (read back through tpurt_kernel_dump); each error names
 * the statement and the column; pallas_call builds descriptors the
 * device's decoder takes, refuses undeclared buffer sharing, counts
 * pl.Buffered(n) blocks; and kernels run on the in-process device against
 * references computed here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt.h"
#include "kselftest_harness.h"
#include "kernel_lowering.h"

#define ROWS	64		/* x_hbm: ROWS x 128 f32 in HBM */
#define BR	8		/* rows a step handles */
#define STEPS	(ROWS / BR)

/*
 * Grid (STEPS,). pt: an int32 page table (8,); x_hbm: f32 (ROWS, 128) in
 * HBM (pl.ANY); y: f32 (BR, 128) blocks; o: f32 (BR, 128) output blocks;
 * o_hbm: f32 (ROWS, 128) output in HBM; buf: VMEM f32 (2, BR, 128); sem:
 * 2 DMA semaphores; rsem: a regular semaphore; slot_ref: SMEM int32 (1,);
 * t: SMEM f32 (2,).
 */
static struct tpurt_grid_spec *mem_spec(void)
{
	int64_t grid[1] = { STEPS }, pt[1] = { 8 }, bufs[3] = { 2, BR, 128 };
	int64_t two[1] = { 2 }, one[1] = { 1 };
	struct tpurt_block_spec any = { 2, { ROWS, 128 }, NULL, TPURT_ANY };
	struct tpurt_block_spec blk = { 2, { BR, 128 }, "i -> i, 0" };
	struct tpurt_grid_spec *gs;

	if (tpurt_grid_spec_create(1, grid, &gs) ||
	    tpurt_grid_spec_add_scalar_prefetch_shaped(gs, "pt", 1, pt) ||
	    tpurt_grid_spec_add_input(gs, "x_hbm", &any) ||
	    tpurt_grid_spec_add_input(gs, "y", &blk) ||
	    tpurt_grid_spec_add_output(gs, "o", &blk) ||
	    tpurt_grid_spec_add_output(gs, "o_hbm", &any) ||
	    tpurt_grid_spec_set_dtype(gs, "x_hbm", TPURT_F32) ||
	    tpurt_grid_spec_set_dtype(gs, "y", TPURT_F32) ||
	    tpurt_grid_spec_set_dtype(gs, "o", TPURT_F32) ||
	    tpurt_grid_spec_set_dtype(gs, "o_hbm", TPURT_F32) ||
	    tpurt_grid_spec_add_scratch(gs, "buf", TPURT_VMEM, TPURT_F32, 3, bufs) ||
	    tpurt_grid_spec_add_scratch(gs, "sem", TPURT_SEMAPHORE_DMA, TPURT_INT32, 1, two) ||
	    tpurt_grid_spec_add_scratch(gs, "rsem", TPURT_SEMAPHORE_REGULAR, TPURT_INT32, 1, one) ||
	    tpurt_grid_spec_add_scratch(gs, "slot_ref", TPURT_SMEM, TPURT_INT32, 1, one) ||
	    tpurt_grid_spec_add_scratch(gs, "t", TPURT_SMEM, TPURT_F32, 1, two))
		return NULL;
	return gs;
}

FIXTURE(mem) {
	struct tpurt_grid_spec *gs;
};

FIXTURE_SETUP(mem)
{
	self->gs = mem_spec();
	ASSERT_NE(NULL, self->gs) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(mem)
{
	tpurt_grid_spec_free(self->gs);
}

/* The TPU pipelining doc's kernel: HBM -> VMEM double-buffered by hand. */
static const char double_buffered[] =
	"@pl.when(pl.program_id(0) == 0)\n"
	"def _():\n"
	"    slot_ref[0] = 0\n"
	"    pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], sem.at[0]).start()\n"
	"slot = slot_ref[0]\n"
	"@pl.when(pl.program_id(0) + 1 < pl.num_programs(0))\n"
	"def _():\n"
	"    nxt = pltpu.make_async_copy(x_hbm.at[pl.ds((pl.program_id(0) + 1) * 8, 8)],\n"
	"                                buf.at[1 - slot], sem.at[1 - slot])\n"
	"    nxt.start()\n"
	"pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[slot], sem.at[slot]).wait()\n"
	"o[...] = buf.at[slot][...] * 2.0 + y[...]\n"
	"slot_ref[0] = 1 - slot\n";

/* (nxt's copy spans two lines there: the bracket continues the statement) */
TEST_F(mem, double_buffered_copies_lower_to_copy_ops)
{
	EXPECT_LOWERS(double_buffered,
		"temp %0: float32[8, 128] in slot 0\n"
		"when(program_id(0) == 0): slot_ref[0] = 0\n"
		"when(program_id(0) == 0): make_async_copy(x_hbm.at[ds(0, 8)], buf.at[0], sem.at[0]).start()\n"
		"when((program_id(0) + 1) < num_programs(0)): make_async_copy(x_hbm.at[ds((program_id(0) + 1) * 8, 8)], buf.at[1 - slot_ref[0]], sem.at[1 - slot_ref[0]]).start()\n"
		"make_async_copy(x_hbm.at[ds(0, 8)], buf.at[slot_ref[0]], sem.at[slot_ref[0]]).wait()\n"
		"%0[...] = multiply(buf.at[slot_ref[0]][...], 2)\n"
		"o[...] = add(%0[...], y[...])\n"
		"slot_ref[0] = 1 - slot_ref[0]\n");
}

TEST_F(mem, sync_copy_semaphores_and_scalar_reads)
{
	EXPECT_LOWERS("pltpu.sync_copy(x_hbm.at[pl.ds(pl.program_id(0) * 8, 8), :], buf.at[1])\n"
		      "pltpu.sync_copy(buf.at[1], o_hbm.at[pl.ds(pt[pl.program_id(0)] * 8, 8)])\n"
		      "pltpu.semaphore_signal(rsem, 2)\n"
		      "pltpu.semaphore_wait(rsem.at[0], value=2)\n"
		      "n = pltpu.semaphore_read(sem.at[1])\n"
		      "o[...] = jnp.zeros_like(o) + n\n",
		      "temp %0: float32[8, 128] in slot 0\n"
		      "sync_copy(x_hbm.at[ds(program_id(0) * 8, 8), :], buf.at[1])\n"
		      "sync_copy(buf.at[1], o_hbm.at[ds(pt[program_id(0)] * 8, 8)])\n"
		      "semaphore_signal(rsem, 2)\n"
		      "semaphore_wait(rsem.at[0], 2)\n"
		      "%0[...] = 0\n"
		      "o[...] = add(%0[...], scalar(semaphore_read(sem.at[1])))\n");
}

TEST_F(mem, windows_of_vmem_refs_in_body_ops)
{
	EXPECT_LOWERS("o.at[pl.ds(0, 4)][...] = buf[1, pl.ds(4, 4)] + 1.0\n"
		      "o[...] = buf[0]\n",
		      "o.at[ds(0, 4)][...] = add(buf.at[1, ds(4, 4)][...], 1)\n"
		      "o[...] = buf.at[0][...]\n");
}

/* Windows the body cannot take as 2-D refs (an index in a middle
 * dimension, a column) are gathered into a temporary, or scattered from
 * one, by the DMA engine. */
TEST_F(mem, middle_and_column_windows_go_through_copies)
{
	EXPECT_LOWERS("o.at[pl.ds(0, 2)][...] = buf.at[pl.ds(0, 2), 3][...] * 2.0\n"
		      "buf[:, 1, :] = o[pl.ds(2, 2)]\n"
		      "buf[0, :, 5] = o[0, pl.ds(0, 8)]\n",
		      "temp %0: float32[2, 128] in slot 0\n"
		      "temp %1: float32[1, 8] in slot 1\n"
		      "sync_copy(buf.at[ds(0, 2), 3], %0)\n"
		      "o.at[ds(0, 2)][...] = multiply(%0[...], 2)\n"
		      "%0[...] = o.at[ds(2, 2)][...]\n"
		      "sync_copy(%0, buf.at[:, 1, :])\n"
		      "%1[...] = o.at[0, ds(0, 8)][...]\n"
		      "sync_copy(%1.at[0], buf.at[0, :, 5])\n");
}

/* Values of rank 3 (buf is (2, 8, 128)) decomposed into 2-D ops and
 * copies (stmt_nd.c): a sum along the first axis is one add of its
 * slabs; a swap of the leading axes copies window to window, and a max
 * along the middle axis of (8, 2, 128) is a maximum of each row pair. */
TEST_F(mem, rank_3_reductions_and_transposes_decompose)
{
	EXPECT_LOWERS("o[...] = jnp.sum(buf[...], axis=0)\n"
		      "o[...] = jnp.max(jnp.swapaxes(buf[...], 0, 1), axis=1)\n",
		      "temp %0: float32[8, 128] in slot 0\n"
		      "temp %1: float32[16, 128] in slot 1\n"
		      "%0[...] = add(buf.at[0][...], buf.at[1][...])\n"
		      "o[...] = %0[...]\n"
		      "sync_copy(buf.at[0, :, :], %1.at[:, 0, :])\n"
		      "sync_copy(buf.at[1, :, :], %1.at[:, 1, :])\n"
		      "%0.at[pl.ds(0, 1)][...] = maximum(%1.at[0, 0][...], %1.at[0, 1][...])\n"
		      "%0.at[pl.ds(1, 1)][...] = maximum(%1.at[1, 0][...], %1.at[1, 1][...])\n"
		      "%0.at[pl.ds(2, 1)][...] = maximum(%1.at[2, 0][...], %1.at[2, 1][...])\n"
		      "%0.at[pl.ds(3, 1)][...] = maximum(%1.at[3, 0][...], %1.at[3, 1][...])\n"
		      "%0.at[pl.ds(4, 1)][...] = maximum(%1.at[4, 0][...], %1.at[4, 1][...])\n"
		      "%0.at[pl.ds(5, 1)][...] = maximum(%1.at[5, 0][...], %1.at[5, 1][...])\n"
		      "%0.at[pl.ds(6, 1)][...] = maximum(%1.at[6, 0][...], %1.at[6, 1][...])\n"
		      "%0.at[pl.ds(7, 1)][...] = maximum(%1.at[7, 0][...], %1.at[7, 1][...])\n"
		      "o[...] = %0[...]\n");
}

TEST_F(mem, scalar_where_folds_and_smem_stores)
{
	EXPECT_LOWERS("slot = slot_ref[0]\n"
		      "slot_ref[0] = jnp.where(slot == 0, 1, 0)\n"
		      "slot = slot_ref[0]\n"
		      "slot_ref[0] += pt[3]\n",
		      "slot_ref[0] = ((slot_ref[0] == 0) != 0) * 1 + ((slot_ref[0] == 0) == 0) * 0\n"
		      "slot_ref[0] = slot_ref[0] + pt[3]\n");
}

TEST_F(mem, run_scoped_blocks_share_slots)
{
	EXPECT_LOWERS("@pl.run_scoped(s=pltpu.SemaphoreType.DMA, v=pltpu.VMEM((8, 128), jnp.float32))\n"
		      "def _(v, s):\n"
		      "    pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], v, s).start()\n"
		      "    pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], v, s).wait()\n"
		      "    o[...] = v[...]\n"
		      "@pl.run_scoped(s=pltpu.SemaphoreType.DMA((2,)))\n"
		      "def _(s):\n"
		      "    pltpu.semaphore_signal(s.at[1], 1)\n"
		      "    pltpu.semaphore_wait(s.at[1], 1)\n"
		      "@pl.run_scoped(s=pltpu.SemaphoreType.DMA)\n"
		      "def _(s):\n"
		      "    pltpu.semaphore_signal(s, 1)\n"
		      "    pltpu.semaphore_wait(s, 1)\n",
		      "scoped s: SemaphoreType.DMA int32[1] in slot 0, ops 0 to 2\n"
		      "scoped v: VMEM float32[8, 128] in slot 1, ops 0 to 2\n"
		      "scoped s: SemaphoreType.DMA int32[2] in slot 2, ops 3 to 4\n"
		      "scoped s: SemaphoreType.DMA int32[1] in slot 0, ops 5 to 6\n"
		      "make_async_copy(x_hbm.at[ds(0, 8)], v, s).start()\n"
		      "make_async_copy(x_hbm.at[ds(0, 8)], v, s).wait()\n"
		      "o[...] = v[...]\n"
		      "semaphore_signal(s.at[1], 1)\n"
		      "semaphore_wait(s.at[1], 1)\n"
		      "semaphore_signal(s, 1)\n"
		      "semaphore_wait(s, 1)\n");
}

TEST_F(mem, errors_name_the_statement_and_column)
{
	EXPECT_FAILS("pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], semx.at[0]).start()",
		     "statement 1: unknown ref 'semx' at column 57");
	EXPECT_FAILS("pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], buf.at[1]).start()",
		     "'buf' is not a semaphore");
	EXPECT_FAILS("pltpu.make_async_copy(x_hbm.at[pl.ds(0, 4)], buf.at[0], sem.at[0]).start()",
		     "copy of x_hbm.at[ds(0, 4)] (4, 128) into buf.at[0] (8, 128): the shapes differ at column 1");
	EXPECT_FAILS("pltpu.sync_copy(buf.at[0, 1, 2, 3], o)",
		     "window of 'buf' has 4 indices, the ref has 3 dimensions at column 17");
	EXPECT_FAILS("pltpu.sync_copy(buf.at[0], y)",
		     "'y' is an input: a copy cannot write into it at column 28");
	EXPECT_FAILS("y[...] = o[...]", "'y' is an input: its block is read-only at column 1");
	EXPECT_FAILS("o[...] = sem[...] + 1.0", "'sem' is a semaphore: read it with pltpu.semaphore_read");
	EXPECT_FAILS("o[...] = o[...] + sem[0]", "'sem' is a semaphore");
	EXPECT_FAILS("o[...] = x_hbm[...]", "'x_hbm' is in HBM (pl.ANY): copy it into VMEM");
	EXPECT_FAILS("o[...] = buf.at[0] + 1.0", "ref.at[...] is a window: read it with ref.at[i][...]");
	EXPECT_FAILS("pltpu.semaphore_signal(sem.at[0, 1], 1)",
		     "semaphore 'sem': name one element, sem.at[i] at column 24");
	EXPECT_FAILS("o[...] = buf.at[pl.ds(0, 2), 3][...]",
		     "a value of shape (2, 128) stored into 'o' of shape (8, 128)");
	EXPECT_FAILS("pltpu.sync_copy(x_hbm.at[pl.ds(60, 8)], buf.at[0])",
		     "dimension 0: [60, 68) leaves the ref's 64 elements at column 17");
	EXPECT_FAILS("pltpu.sync_copy(buf.at[0], o_hbm.at[pl.ds(0, 8)])\n"
		     "cp.start()", "statement 2: expected pltpu.make_async_copy(src, dst, sem) or a name bound to one");
	EXPECT_FAILS("cp = pltpu.make_async_copy(buf.at[0], buf.at[1], sem.at[0])\no[...] = cp",
		     "statement 2: 'cp' is a copy descriptor: use cp.start() or cp.wait() at column 10");
	EXPECT_FAILS("slot_ref[0] = o[...]", "an SMEM element takes one value, not a (8, 128) array");
	EXPECT_FAILS("slot = slot_ref[0]\nslot_ref[0] = 1 - slot\no[...] = buf[slot]",
		     "statement 3: 'slot' reads 'slot_ref', which statement 2 changed after 'slot' was bound; bind it again to read the new value at column 14");
	EXPECT_FAILS("n = pltpu.semaphore_read(rsem)\npltpu.semaphore_signal(rsem, 1)\nslot_ref[0] = n",
		     "statement 3: 'n' reads 'rsem', which statement 2 changed");
	EXPECT_FAILS("pltpu.semaphore_wait(sem.at[0], 1) + 1", "expected '=' or an augmented assignment");
	EXPECT_FAILS("@pl.run_scoped(v=pltpu.VMEM((8, 128), jnp.float32))\ndef _(w):\n    o[...] = v[...]",
		     "expected 'def _(v):' after @pl.run_scoped");
	EXPECT_FAILS("@pl.run_scoped(v=pltpu.HBM((8, 128), jnp.float32))\ndef _(v):\n    o[...] = v[...]",
		     "expected pltpu.SemaphoreType.DMA");
}

/* A statement that fails leaves the kernel as it was. */
TEST_F(mem, a_failed_statement_changes_nothing)
{
	struct tpurt_kernel *k;
	char *before, *after;

	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmts(k, self->gs, "cp = pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], sem.at[0])\ncp.start()"))
		TH_LOG("%s", tpurt_last_error());
	before = kernel_dump_string(k);
	EXPECT_EQ(-EINVAL, tpurt_kernel_stmt(k, self->gs, "cp.wait(1)"));
	EXPECT_EQ(-EINVAL, tpurt_kernel_stmts(k, self->gs,
		"@pl.run_scoped(v=pltpu.VMEM((8, 128), jnp.float32))\ndef _(v):\n    o[...] = v[...] + zz"));
	after = kernel_dump_string(k);
	EXPECT_STREQ(before, after);
	free(before), free(after);
	tpurt_kernel_free(k);
}

/* --- pallas_call: descriptors, aliases, Buffered(n) --- */

struct args {
	struct tpurt_array *pt, *x, *y, *o, *oh;
};

static int make_args(struct tpurt_device *dev, struct args *a)
{
	int64_t pt[1] = { 8 }, big[2] = { ROWS, 128 }, blk[2] = { BR * STEPS, 128 };

	memset(a, 0, sizeof(*a));
	return tpurt_array_create(dev, TPURT_INT32, 1, pt, &a->pt) ||
	       tpurt_array_create(dev, TPURT_F32, 2, big, &a->x) ||
	       tpurt_array_create(dev, TPURT_F32, 2, blk, &a->y) ||
	       tpurt_array_create(dev, TPURT_F32, 2, blk, &a->o) ||
	       tpurt_array_create(dev, TPURT_F32, 2, big, &a->oh);
}

static void free_args(struct args *a)
{
	tpurt_array_free(a->pt), tpurt_array_free(a->x), tpurt_array_free(a->y);
	tpurt_array_free(a->o), tpurt_array_free(a->oh);
}

FIXTURE(call) {
	struct tpurt_device *dev;
	struct tpurt_grid_spec *gs;
	struct args a;
};

FIXTURE_SETUP(call)
{
	struct tpurt_sim_config cfg = { .hbm_size = 64 << 20 };

	ASSERT_EQ(0, tpurt_open_sim(&cfg, &self->dev)) TH_LOG("%s", tpurt_last_error());
	self->gs = mem_spec();
	ASSERT_NE(NULL, self->gs) TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, make_args(self->dev, &self->a)) TH_LOG("%s", tpurt_last_error());
}

FIXTURE_TEARDOWN(call)
{
	free_args(&self->a);
	tpurt_grid_spec_free(self->gs);
	tpurt_close(self->dev);
}

static int build(const struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		 const struct tpurt_compiler_params *p,
		 struct tpurt_array *const *args, int nargs)
{
	void *desc = NULL;
	size_t len;
	int ret = tpurt_pallas_call_build(k, gs, p, args, nargs, &desc, &len);

	free(desc);
	return ret;
}

TEST_F(call, the_double_buffered_kernel_builds)
{
	struct tpurt_array *args[] = { self->a.pt, self->a.x, self->a.y, self->a.o,
				       self->a.oh };
	struct tpurt_kernel *k;

	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmts(k, self->gs, double_buffered))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(0, build(k, self->gs, NULL, args, 5)) TH_LOG("%s", tpurt_last_error());
	tpurt_kernel_free(k);
}

TEST_F(call, builder_errors_name_the_op)
{
	struct tpurt_array *args[] = { self->a.pt, self->a.x, self->a.y, self->a.o,
				       self->a.oh };
	struct tpurt_kernel *k;

	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_copy_start(k, "x_hbm.at[pl.ds(0, 8)]", "buf.at[0]", "nosem"));
	EXPECT_EQ(-EINVAL, build(k, self->gs, NULL, args, 5));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "kernel op 0 (copy_start): no ref named 'nosem'"))
		TH_LOG("%s", tpurt_last_error());
	tpurt_kernel_free(k);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_copy_start(k, "x_hbm.at[pl.ds(0, 4)]", "buf.at[0]", "sem.at[1]"));
	EXPECT_EQ(-EINVAL, build(k, self->gs, NULL, args, 5));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "kernel op 0 (copy_start): copy shapes differ"))
		TH_LOG("%s", tpurt_last_error());
	tpurt_kernel_free(k);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_scalar_store(k, "y[0]", "1"));
	EXPECT_EQ(-EINVAL, build(k, self->gs, NULL, args, 5));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "kernel op 0 (scalar_store): 'y' is an input"))
		TH_LOG("%s", tpurt_last_error());
	tpurt_kernel_free(k);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_run_scoped(k, "v", TPURT_VMEM, TPURT_F32, 2,
					     (int64_t[]){ 8, 128 }));
	ASSERT_EQ(0, tpurt_kernel_zero(k, "v"));
	EXPECT_EQ(-EINVAL, build(k, self->gs, NULL, args, 5));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "1 run_scoped() block(s) not ended"))
		TH_LOG("%s", tpurt_last_error());
	ASSERT_EQ(0, tpurt_kernel_end_scoped(k));
	ASSERT_EQ(0, tpurt_kernel_zero(k, "v"));
	EXPECT_EQ(-EINVAL, build(k, self->gs, NULL, args, 5));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "kernel op 1 (zero): no ref named 'v'"))
		TH_LOG("%s", tpurt_last_error());
	tpurt_kernel_free(k);
}

/* A grid spec: x (BR, 128) blocks in, o (BR, 128) blocks out, Buffered(n). */
static struct tpurt_grid_spec *copy_spec(int buffers)
{
	int64_t grid[1] = { STEPS };
	struct tpurt_block_spec in = { 2, { BR, 128 }, "i -> i, 0", TPURT_VMEM, buffers };
	struct tpurt_block_spec out = { 2, { BR, 128 }, "i -> i, 0" };
	struct tpurt_grid_spec *gs;

	if (tpurt_grid_spec_create(1, grid, &gs) ||
	    tpurt_grid_spec_add_input(gs, "x", &in) ||
	    tpurt_grid_spec_add_output(gs, "o", &out) ||
	    tpurt_grid_spec_set_dtype(gs, "x", TPURT_F32) ||
	    tpurt_grid_spec_set_dtype(gs, "o", TPURT_F32))
		return NULL;
	return gs;
}

TEST_F(call, aliases_declared_and_undeclared)
{
	struct tpurt_grid_spec *gs = copy_spec(0);
	struct tpurt_array *same[] = { self->a.y, self->a.y };
	struct tpurt_array *null_out[] = { self->a.y, NULL };
	struct tpurt_array *other[] = { self->a.y, self->a.o };
	struct tpurt_alias alias = { 0, 0 }, bad = { 1, 0 };
	struct tpurt_compiler_params aliased = { .input_output_aliases = &alias,
						 .num_aliases = 1 };
	struct tpurt_compiler_params wrong = { .input_output_aliases = &bad,
					       .num_aliases = 1 };
	struct tpurt_kernel *k;

	ASSERT_NE(NULL, gs);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmt(k, gs, "o[...] = x[...] + 1.0"));
	EXPECT_EQ(-EINVAL, build(k, gs, NULL, same, 2));
	EXPECT_NE(NULL, strstr(tpurt_last_error(),
			       "args 0 and 1 share a buffer: declare input_output_aliases (input 'x' and output 'o')"))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(0, build(k, gs, &aliased, same, 2)) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(0, build(k, gs, &aliased, null_out, 2)) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(-EINVAL, build(k, gs, &aliased, other, 2));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "output 'o' is aliased to input 'x'"))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(-EINVAL, build(k, gs, &wrong, same, 2));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "input_output_aliases[0]: arg 1 is not an input"))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(-EINVAL, build(k, gs, NULL, null_out, 2));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "array for output 'o' is NULL"))
		TH_LOG("%s", tpurt_last_error());
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
}

TEST_F(call, buffered_blocks_count_in_vmem)
{
	struct tpurt_array *args[] = { self->a.y, self->a.o };
	/* x and o blocks are 4096 bytes: a limit that fits 1 + 2 blocks, not 2 + 2 */
	struct tpurt_compiler_params tight = { .vmem_limit_bytes = 3 * 4096 };
	struct tpurt_grid_spec *one = copy_spec(1), *two = copy_spec(0), *three = copy_spec(3);
	struct tpurt_kernel *k;

	ASSERT_NE(NULL, one);
	ASSERT_NE(NULL, two);
	ASSERT_NE(NULL, three);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmt(k, one, "o[...] = x[...] * 3.0"));
	EXPECT_EQ(0, build(k, one, &tight, args, 2)) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(-ENOSPC, build(k, two, &tight, args, 2));
	EXPECT_NE(NULL, strstr(tpurt_last_error(),
			       "the kernel needs 16384 bytes ('x' 2 x 4096, 'o' 2 x 4096) but the limit is 12288 (over by 4096)"))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(-ENOSPC, build(k, three, &tight, args, 2));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "'x' 3 x 4096, 'o' 2 x 4096"))
		TH_LOG("%s", tpurt_last_error());
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(one), tpurt_grid_spec_free(two), tpurt_grid_spec_free(three);
}

/* --- end to end on the in-process device, against host references --- */

static void fill(struct tpurt_array *a, uint32_t seed)
{
	float *p = tpurt_array_map(a);

	for (uint64_t i = 0; i < tpurt_array_size(a); i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = (float)(int)(seed >> 24) / 16.0f - 8.0f;	/* exact in f32 */
	}
}

/* Runs @text over mem_spec() with pt = @pt; 0 or the error. */
static int run(struct tpurt_device *dev, const struct tpurt_grid_spec *gs,
	       struct args *a, const int32_t *pt, const char *text,
	       struct tpurt_job_stats *st)
{
	struct tpurt_array *args[] = { a->pt, a->x, a->y, a->o, a->oh };
	struct tpurt_kernel *k;
	int ret;

	if (tpurt_array_write(a->pt, pt) || tpurt_kernel_create(&k))
		return -1;
	ret = tpurt_kernel_stmts(k, gs, text);
	if (!ret)
		ret = tpurt_pallas_call(k, gs, NULL, args, 5, st);
	tpurt_kernel_free(k);
	return ret;
}

TEST_F(call, double_buffered_manual_copies_run)
{
	static const int32_t pt[8] = { 0 };
	const float *x = tpurt_array_map(self->a.x), *y = tpurt_array_map(self->a.y);
	const float *o = tpurt_array_map(self->a.o);
	struct tpurt_job_stats st;
	int bad = 0;

	fill(self->a.x, 1);
	fill(self->a.y, 2);
	ASSERT_EQ(0, run(self->dev, self->gs, &self->a, pt, double_buffered, &st))
		TH_LOG("%s", tpurt_last_error());
	for (int i = 0; i < ROWS * 128; i++)
		bad += o[i] != x[i] * 2.0f + y[i];
	EXPECT_EQ(0, bad);
	EXPECT_EQ((uint64_t)ROWS * 128 * 4 + 2 * (uint64_t)ROWS * 128 * 4 / 2,
		  st.hbm_bytes_in) TH_LOG("x once by copies, y by blocks");
}

TEST_F(call, sync_copy_gathers_by_a_page_table)
{
	static const int32_t pt[8] = { 5, 2, 7, 0, 3, 6, 1, 4 };
	const float *x = tpurt_array_map(self->a.x), *o = tpurt_array_map(self->a.o);
	const float *oh = tpurt_array_map(self->a.oh);
	int bad = 0;

	fill(self->a.x, 3);
	ASSERT_EQ(0, run(self->dev, self->gs, &self->a, pt,
			 "pltpu.sync_copy(x_hbm.at[pl.ds(pt[pl.program_id(0)] * 8, 8)], buf.at[0])\n"
			 "o[...] = buf.at[0][...] + 1.0\n"
			 "pltpu.sync_copy(buf.at[0], o_hbm.at[pl.ds(pl.program_id(0) * 8, 8), :])\n",
			 NULL)) TH_LOG("%s", tpurt_last_error());
	for (int s = 0; s < STEPS; s++)
		for (int i = 0; i < BR * 128; i++) {
			float want = x[pt[s] * BR * 128 + i];

			bad += o[s * BR * 128 + i] != want + 1.0f;
			bad += oh[s * BR * 128 + i] != want;
		}
	EXPECT_EQ(0, bad);
}

TEST_F(call, scalar_stores_carry_a_prefix_sum)
{
	static const int32_t pt[8] = { 3, -1, 4, 1, -5, 9, 2, 6 };
	const float *o = tpurt_array_map(self->a.o);
	int bad = 0, sum = 0;

	ASSERT_EQ(0, run(self->dev, self->gs, &self->a, pt,
			 "@pl.when(pl.program_id(0) == 0)\n"
			 "def _():\n"
			 "    slot_ref[0] = 0\n"
			 "slot_ref[0] += pt[pl.program_id(0)]\n"
			 "o[...] = jnp.zeros_like(o) + slot_ref[0]\n", NULL))
		TH_LOG("%s", tpurt_last_error());
	for (int s = 0; s < STEPS; s++) {
		sum += pt[s];
		for (int i = 0; i < BR * 128; i++)
			bad += o[s * BR * 128 + i] != (float)sum;
	}
	EXPECT_EQ(0, bad);
}

TEST_F(call, run_scoped_scratch_and_semaphore)
{
	static const int32_t pt[8] = { 0 };
	const float *x = tpurt_array_map(self->a.x), *o = tpurt_array_map(self->a.o);
	int bad = 0;

	fill(self->a.x, 4);
	ASSERT_EQ(0, run(self->dev, self->gs, &self->a, pt,
			 "@pl.run_scoped(s=pltpu.SemaphoreType.DMA, v=pltpu.VMEM((8, 128), jnp.float32))\n"
			 "def _(s, v):\n"
			 "    cp = pltpu.make_async_copy(x_hbm.at[pl.ds(pl.program_id(0) * 8, 8)], v, s)\n"
			 "    cp.start()\n"
			 "    cp.wait()\n"
			 "    o[...] = v[...] * 3.0\n", NULL)) TH_LOG("%s", tpurt_last_error());
	for (int i = 0; i < ROWS * 128; i++)
		bad += o[i] != x[i] * 3.0f;
	EXPECT_EQ(0, bad);
}

/* x blocks in; base in HBM aliased to out: even steps copy their block
 * over it, odd steps leave base's rows. */
TEST_F(call, aliased_output_keeps_what_is_not_written)
{
	int64_t grid[1] = { STEPS };
	struct tpurt_block_spec blk = { 2, { BR, 128 }, "i -> i, 0" };
	struct tpurt_block_spec any = { 0, { 0 }, NULL, TPURT_ANY };
	struct tpurt_alias alias = { .input = 1, .output = 0 };
	struct tpurt_compiler_params p = { .input_output_aliases = &alias,
					   .num_aliases = 1 };
	struct tpurt_array *x = self->a.y, *base = self->a.o;
	struct tpurt_array *args[] = { x, base, NULL };
	float *want = malloc(BR * STEPS * 128 * sizeof(float));
	const float *xs = tpurt_array_map(x), *got = tpurt_array_map(base);
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	int bad = 0;

	ASSERT_NE(NULL, want);
	fill(x, 5);
	fill(base, 6);
	memcpy(want, tpurt_array_map(base), BR * STEPS * 128 * sizeof(float));
	for (int s = 0; s < STEPS; s += 2)
		memcpy(want + s * BR * 128, xs + s * BR * 128, BR * 128 * sizeof(float));
	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "x", &blk));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "base", &any));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "out", &any));
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_when(k, "i % 2 == 0"));
	ASSERT_EQ(0, tpurt_kernel_sync_copy(k, "x", "out.at[pl.ds(i * 8, 8)]"));
	ASSERT_EQ(0, tpurt_kernel_end_when(k));
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, &p, args, 3, NULL)) TH_LOG("%s", tpurt_last_error());
	for (int i = 0; i < BR * STEPS * 128; i++)
		bad += got[i] != want[i];
	EXPECT_EQ(0, bad);
	free(want);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
}

TEST_F(call, single_buffered_blocks_run)
{
	struct tpurt_grid_spec *gs = copy_spec(1);
	struct tpurt_array *args[] = { self->a.y, self->a.o };
	const float *x = tpurt_array_map(self->a.y), *o = tpurt_array_map(self->a.o);
	struct tpurt_kernel *k;
	int bad = 0;

	ASSERT_NE(NULL, gs);
	fill(self->a.y, 7);
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmt(k, gs, "o[...] = x[...] * 3.0 - 1.0"));
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, NULL, args, 2, NULL)) TH_LOG("%s", tpurt_last_error());
	for (int i = 0; i < BR * STEPS * 128; i++)
		bad += o[i] != x[i] * 3.0f - 1.0f;
	EXPECT_EQ(0, bad);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
}

TEST_F(call, schedule_dump_shows_the_copies_of_each_step)
{
	struct tpurt_array *args[] = { self->a.pt, self->a.x, self->a.y, self->a.o,
				       self->a.oh };
	struct tpurt_schedule_counts cnt;
	struct tpurt_kernel *k;
	char *buf = NULL;
	size_t len;
	FILE *f;

	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmts(k, self->gs, double_buffered))
		TH_LOG("%s", tpurt_last_error());
	f = open_memstream(&buf, &len);
	ASSERT_EQ(0, tpurt_schedule_dump_kernel(k, self->gs, NULL, args, 5, f, 3, &cnt))
		TH_LOG("%s", tpurt_last_error());
	fclose(f);
	EXPECT_STREQ("step 0 (0):  x_hbm hbm  y[0, 0] fetch  o[0, 0] write  o_hbm hbm\n"
		     "    copy x_hbm[0:8, 0:128] -> buf[0, 0:8, 0:128] on sem[0]\n"
		     "    copy x_hbm[8:16, 0:128] -> buf[1, 0:8, 0:128] on sem[1]\n"
		     "step 1 (1):  x_hbm hbm  y[1, 0] fetch  o[1, 0] write  o_hbm hbm\n"
		     "    copy x_hbm[16:24, 0:128] -> buf[0, 0:8, 0:128] on sem[0]\n"
		     "step 2 (2):  x_hbm hbm  y[2, 0] fetch  o[2, 0] write  o_hbm hbm\n"
		     "    copy x_hbm[24:32, 0:128] -> buf[1, 0:8, 0:128] on sem[1]\n"
		     "... 5 more steps\n", buf);
	EXPECT_EQ((uint64_t)STEPS, cnt.blocks_fetched);
	EXPECT_EQ((uint64_t)STEPS, cnt.blocks_written);
	free(buf);
	tpurt_kernel_free(k);
}

TEST_F(call, regular_semaphores_signal_read_and_wait)
{
	static const int32_t pt[8] = { 0 };
	const float *o = tpurt_array_map(self->a.o);
	int bad = 0;

	ASSERT_EQ(0, run(self->dev, self->gs, &self->a, pt,
			 "pltpu.semaphore_signal(rsem, pl.program_id(0) + 2)\n"
			 "n = pltpu.semaphore_read(rsem.at[0])\n"
			 "o[...] = jnp.zeros_like(o) + n * 10\n"
			 "pltpu.semaphore_wait(rsem, pl.program_id(0) + 2)\n", NULL))
		TH_LOG("%s", tpurt_last_error());
	for (int s = 0; s < STEPS; s++)
		for (int i = 0; i < BR * 128; i++)
			bad += o[s * BR * 128 + i] != (float)((s + 2) * 10);
	EXPECT_EQ(0, bad);
}

TEST_F(call, a_wait_nothing_will_satisfy_fails_with_names)
{
	static const int32_t pt[8] = { 0 };
	struct tpurt_job_stats st;

	EXPECT_EQ(-EIO, run(self->dev, self->gs, &self->a, pt,
			    "pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[1], sem.at[1]).wait()\n"
			    "o[...] = y[...]\n", &st));
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "step 0: op 0 waits on semaphore"))
		TH_LOG("%s", tpurt_last_error());
	EXPECT_NE(NULL, strstr(tpurt_last_error(), "'sem'")) TH_LOG("%s", tpurt_last_error());
	EXPECT_EQ(0, st.error.op);
	EXPECT_EQ(0, st.error.step);
}

/* SMEM-space blocks: an int32 input read by the scalar core and by a
 * broadcast, an int32 output written by scalar stores. */
TEST_F(call, smem_space_blocks_read_and_written)
{
	int64_t grid[1] = { 4 }, shape[2] = { 4, 8 };
	struct tpurt_block_spec sm = { 2, { 1, 8 }, "i -> i, 0", TPURT_SMEM };
	struct tpurt_block_spec blk = { 2, { BR, 128 }, "i -> i, 0" };
	struct tpurt_array *in, *cnt, *args[4];
	struct tpurt_grid_spec *gs;
	struct tpurt_kernel *k;
	int32_t *iv, *cv;
	const float *o = tpurt_array_map(self->a.o);
	int bad = 0;

	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT32, 2, shape, &in));
	ASSERT_EQ(0, tpurt_array_create(self->dev, TPURT_INT32, 2, shape, &cnt));
	iv = tpurt_array_map(in);
	for (int i = 0; i < 32; i++)
		iv[i] = i * 3 - 20;
	ASSERT_EQ(0, tpurt_grid_spec_create(1, grid, &gs));
	ASSERT_EQ(0, tpurt_grid_spec_add_input(gs, "sm", &sm));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "o", &blk));
	ASSERT_EQ(0, tpurt_grid_spec_add_output(gs, "cnt", &sm));
	ASSERT_EQ(0, tpurt_grid_spec_set_dtype(gs, "sm", TPURT_INT32));
	ASSERT_EQ(0, tpurt_grid_spec_set_dtype(gs, "o", TPURT_F32));
	ASSERT_EQ(0, tpurt_grid_spec_set_dtype(gs, "cnt", TPURT_INT32));
	ASSERT_EQ(0, tpurt_kernel_create(&k));
	ASSERT_EQ(0, tpurt_kernel_stmts(k, gs,
		"o[...] = jnp.zeros_like(o) + sm[0, 2]\n"
		"cnt[0, 0] = sm[0, 1] * 2 + pl.program_id(0)\n"
		"cnt[0, 7] = jnp.where(sm[0, 5] > 0, 1, 0)\n"))
		TH_LOG("%s", tpurt_last_error());
	args[0] = in, args[1] = self->a.o, args[2] = cnt;
	ASSERT_EQ(0, tpurt_pallas_call(k, gs, NULL, args, 3, NULL)) TH_LOG("%s", tpurt_last_error());
	cv = tpurt_array_map(cnt);
	for (int s = 0; s < 4; s++) {
		for (int i = 0; i < BR * 128; i++)
			bad += o[s * BR * 128 + i] != (float)iv[s * 8 + 2];
		bad += cv[s * 8] != iv[s * 8 + 1] * 2 + s;
		bad += cv[s * 8 + 7] != (iv[s * 8 + 5] > 0);
	}
	EXPECT_EQ(0, bad);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	tpurt_array_free(in), tpurt_array_free(cnt);
}

TEST_F(call, body_ops_read_and_write_windows)
{
	static const int32_t pt[8] = { 0 };
	const float *x = tpurt_array_map(self->a.x), *o = tpurt_array_map(self->a.o);
	int bad = 0;

	fill(self->a.x, 8);
	ASSERT_EQ(0, run(self->dev, self->gs, &self->a, pt,
			 "pltpu.sync_copy(x_hbm.at[pl.ds(pl.program_id(0) * 8, 8)], buf.at[1])\n"
			 "o.at[pl.ds(0, 4)][...] = buf[1, pl.ds(4, 4)] + 1.0\n"
			 "o.at[pl.ds(4, 4), :][...] = buf.at[1, 0:4][...] * 2.0\n", NULL))
		TH_LOG("%s", tpurt_last_error());
	for (int s = 0; s < STEPS; s++)
		for (int r = 0; r < BR; r++)
			for (int c = 0; c < 128; c++) {
				float got = o[(s * BR + r) * 128 + c];
				float want = r < 4 ? x[(s * BR + r + 4) * 128 + c] + 1.0f :
					     x[(s * BR + r - 4) * 128 + c] * 2.0f;

				bad += got != want;
			}
	EXPECT_EQ(0, bad);
}

/* pl.ds(start, size, stride) windows: the DMA engine gathers every other
 * row of HBM; a strided window of VMEM read by a body op goes through a
 * copy into a temporary; a strided store scatters one. */
TEST_F(call, strided_windows_gather_and_scatter)
{
	static const int32_t pt[8] = { 0 };
	const float *x = tpurt_array_map(self->a.x), *o = tpurt_array_map(self->a.o);
	int bad = 0;

	fill(self->a.x, 5);
	ASSERT_EQ(0, run(self->dev, self->gs, &self->a, pt,
			 "pltpu.sync_copy(x_hbm.at[pl.ds(pl.program_id(0) % 4 * 16, 8, 2)], buf.at[0])\n"
			 "o.at[pl.ds(0, 4)][...] = buf.at[0, 0:8:2][...] + 1.0\n"
			 "o[pl.ds(4, 2, stride=2), :] = buf.at[0, pl.ds(1, 2, 4)][...] * 2.0\n"
			 "o[5:8:2, :] = buf.at[0, 2:8:4][...]\n", NULL))
		TH_LOG("%s", tpurt_last_error());
	for (int s = 0; s < STEPS; s++)
		for (int r = 0; r < BR; r++)
			for (int c = 0; c < 128; c++) {
				/* buf row b holds x row s * 16 + 2 b */
				int b = r < 4 ? 2 * r : r == 4 ? 1 : r == 6 ? 5 :
					r == 5 ? 2 : 6;
				float v = x[(s % 4 * 16 + 2 * b) * 128 + c];
				float want = r < 4 ? v + 1.0f : (r == 4 || r == 6) ? v * 2.0f : v;

				bad += o[(s * BR + r) * 128 + c] != want;
			}
	EXPECT_EQ(0, bad);
}

/* Scalar prefetch's SMEM copy is a copy's source like any SMEM ref. */
TEST_F(call, copies_between_smem_refs)
{
	static const int32_t pt[8] = { 11, 22, 33, 44, 55, 66, 77, 88 };
	const float *o = tpurt_array_map(self->a.o);
	int bad = 0;

	ASSERT_EQ(0, run(self->dev, self->gs, &self->a, pt,
			 "pltpu.sync_copy(pt.at[pl.ds(pl.program_id(0), 1)], slot_ref)\n"
			 "o[...] = jnp.zeros_like(o) + slot_ref[0]\n", NULL))
		TH_LOG("%s", tpurt_last_error());
	for (int s = 0; s < STEPS; s++)
		for (int i = 0; i < BR * 128; i++)
			bad += o[s * BR * 128 + i] != (float)pt[s];
	EXPECT_EQ(0, bad);
}

TEST_HARNESS_MAIN
