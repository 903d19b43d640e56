// SPDX-License-Identifier: MIT
/*
 * Pipelining by hand, the TPU pipelining doc's idea: x and y stay in HBM
 * (pl.BlockSpec(memory_space=pl.ANY)) and the kernel moves their blocks of
 * bm rows into two VMEM slots itself, one DMA semaphore a slot, so that
 * block i + 1 travels while block i is added:
 *
 *   grid (rows // bm,), "arbitrary"
 *   in_specs  = [pl.BlockSpec(memory_space=pl.ANY)] * 2
 *   out_specs = pl.BlockSpec((bm, cols), lambda i: (i, 0))
 *   scratch   = [pltpu.VMEM((2, bm, cols), dtype)] * 2 + [pltpu.SemaphoreType.DMA((2,))]
 *
 *   def kernel(x_hbm, y_hbm, o_ref, x_buf, y_buf, sem):
 *       i = pl.program_id(0)
 *       slot = i % 2
 *       def copy(ref, buf, blk, slot):
 *           return pltpu.make_async_copy(ref.at[pl.ds(blk * bm, bm)], buf.at[slot], sem.at[slot])
 *       @pl.when(i == 0)                  # nothing before step 0 started its copy
 *       def _():
 *           copy(x_hbm, x_buf, 0, 0).start(); copy(y_hbm, y_buf, 0, 0).start()
 *       copy(x_hbm, x_buf, i, slot).wait(); copy(y_hbm, y_buf, i, slot).wait()
 *       @pl.when(i + 1 < pl.num_programs(0))
 *       def _():                          # block i + 1 into the other slot
 *           copy(x_hbm, x_buf, i + 1, 1 - slot).start(); ...
 *       o_ref[...] = x_buf.at[slot][...] + y_buf.at[slot][...]
 *
 * (samples/memory_kernels.c writes it.) Sizes: many steps, one step (the
 * prologue's copy is the only one), an odd number of steps (the last
 * block in slot 0), f32 and bf16. Checked against x + y computed here in
 * double; prints the host's wall time beside the modeled v5e time.
 */
#include <stdio.h>

#include "memory_kernels.h"
#include "sample_util.h"

#define NAME "manual_pipeline"

static const struct mp_shape cases[] = {
	/* dtype, rows, cols, bm */
	{ TPURT_F32, 1024, 512, 128 },		/* 8 steps */
	{ TPURT_F32, 128, 256, 128 },		/* a grid of 1 step */
	{ TPURT_BF16, 640, 256, 128 },		/* 5 steps: odd */
	{ TPURT_F32, 24, 128, 8 },		/* 3 small steps */
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static bool run_case(struct tpurt_device *dev,
		     const struct tpurt_device_info *info, size_t c)
{
	const struct mp_shape *s = &cases[c];
	struct tpurt_job_stats st;
	bool correct;

	printf("%s: %s (%lld, %lld), blocks of %lld rows, %lld steps\n", NAME,
	       tpurt_dtype_name(s->dtype), (long long)s->rows,
	       (long long)s->cols, (long long)s->bm,
	       (long long)(s->rows / s->bm));
	if (mp_run(dev, s, 0, 0, &st, &correct)) {
		printf("  run: %s\n", tpurt_last_error());
		return false;
	}
	sample_report_memory(&st);
	return correct;
}

int main(void)
{
	return sample_run_cases(NAME, NCASES, run_case);
}
