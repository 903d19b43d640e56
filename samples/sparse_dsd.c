// SPDX-License-Identifier: MIT
/*
 * The Pallas TPU sparse doc's DSD kernel: dense output = block-sparse X @
 * dense Y. X is stored as its non-zero (bm, bk) blocks grouped by block
 * row, X_blocks (num_blocks, bm, bk), with their block coordinates
 * indices_i, indices_k in scalar prefetch:
 *
 *   grid (N // bn, num_blocks)
 *   x: BlockSpec((1, bm, bk), lambda j, blk, ii, kk: (blk, 0, 0))
 *   y: BlockSpec((bk, bn),    lambda j, blk, ii, kk: (kk[blk], j))
 *   zeros, o: BlockSpec((bm, bn), lambda j, blk, ii, kk: (ii[blk], j))
 *   scratch: accum (bm, bn) f32
 *   input_output_aliases={4: 0}: the zeros array is the output, so output
 *   blocks that no X block reaches are zero, never written
 *
 *   def dsd_kernel(idxs_i_ref, idxs_k_ref, x_ref, y_ref, _, o_ref, accum_scratch):
 *       blk_idx = pl.program_id(1)
 *       @pl.when(blk_idx == 0 | idxs_i_ref[blk_idx] != idxs_i_ref[max(blk_idx - 1, 0)])
 *       def _(): accum_scratch[...] = jnp.zeros_like(accum_scratch)
 *       accum_scratch[...] += jnp.dot(x_ref[0, :, :], y_ref[...], preferred_element_type=jnp.float32)
 *       @pl.when(blk_idx == num_blocks - 1 | idxs_i_ref[blk_idx] != idxs_i_ref[min(blk_idx + 1, ...)])
 *       def _(): o_ref[...] = accum_scratch[...].astype(o_ref.dtype)
 *
 * As the doc, it reads idxs_i_ref[jnp.minimum(blk_idx + 1, num_blocks)],
 * one past the end at the last step: the device, as Mosaic, reads the SMEM
 * word there (idxs_k_ref[0]), and is_end writes the last row out whatever
 * it compares to.
 *
 * Cases: block rows with no blocks (their output stays zero through the
 * alias, checked exactly), a single block, f32 and bf16. Checked against X
 * @ Y computed here in double from the blocks; prints the host's wall time
 * beside the modeled v5e time.
 */
#include <stdio.h>
#include <string.h>

#include "memory_kernels.h"
#include "sample_util.h"

#define NAME "sparse_dsd"

struct dsd_case {
	struct dsd_shape s;
	const char *mask;	/* (m / bm) rows of (k / bk) '0' or '1' */
};

static const struct dsd_case cases[] = {
	/* dtype, m, k, n, bm, bk, bn */
	{ { TPURT_BF16, 512, 512, 512, 128, 128, 128 },		/* row 2 empty */
	  "1010" "0110" "0000" "1111" },
	{ { TPURT_F32, 384, 256, 256, 128, 128, 128 },		/* row 0 empty */
	  "00" "01" "11" },
	{ { TPURT_F32, 256, 256, 384, 128, 128, 128 },		/* one block */
	  "00" "10" },
	{ { TPURT_BF16, 1024, 1024, 512, 256, 256, 256 },	/* rows 1, 3 empty */
	  "0100" "0000" "1001" "0000" },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static bool run_case(struct tpurt_device *dev,
		     const struct tpurt_device_info *info, size_t ci)
{
	const struct dsd_case *c = &cases[ci];
	struct dsd_shape shape = c->s;
	const struct dsd_shape *s = &shape;
	int64_t nblocks = 0;
	struct tpurt_job_stats st;
	bool correct;

	/*
	 * One column block of Y, at most 128 wide, unless TPUEMU_SAMPLE_FULL=1:
	 * the reference product in double took seconds under TCG; the
	 * sparsity is in X.
	 */
	if (!sample_full())
		shape.n = shape.bn = shape.bn < 128 ? shape.bn : 128;
	for (const char *m = c->mask; *m; m++)
		nblocks += *m == '1';
	printf("%s: %s X (%lld, %lld) in (%lld, %lld) blocks, %lld of %zu non-zero, @ Y (%lld, %lld)\n",
	       NAME, tpurt_dtype_name(s->dtype), (long long)s->m, (long long)s->k,
	       (long long)s->bm, (long long)s->bk, (long long)nblocks,
	       strlen(c->mask), (long long)s->k, (long long)s->n);
	if (dsd_run(dev, s, c->mask, 0, &st, &correct)) {
		printf("  run: %s\n", tpurt_last_error());
		return false;
	}
	sample_report("dsd", info, &st, nblocks * s->bm, s->bk, s->n, s->dtype);
	return correct;
}

int main(void)
{
	return sample_run_cases(NAME, NCASES, run_case);
}
