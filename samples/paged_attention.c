// SPDX-License-Identifier: MIT
/*
 * Decode attention over a paged KV cache, following the Pallas TPU ops
 * library's kernel (jax/experimental/pallas/ops/tpu/paged_attention,
 * paged_flash_attention_kernel, the variant with a grid dimension over
 * the sequence): one query a sequence, q (batch, heads, head_dim); the K
 * and V caches (kv_heads, total_pages, page_size, head_dim) stay in HBM
 * (pl.ANY); lengths and the flattened page table page_indices in scalar
 * prefetch, with buffer_index and step, two more scalar-prefetch arrays
 * that the kernel itself updates in SMEM:
 *
 *   grid (batch, kv_heads, pages_per_sequence // pages_per_compute_block)
 *   q, o: BlockSpec((None, heads // kv_heads, head_dim), lambda b, h, i, *_: (b, h, 0))
 *   m, l: the same with one column (f32)
 *   scratch: k and v buffers (2, pages_per_compute_block, page_size,
 *            head_dim) in VMEM, one DMA semaphore
 *
 * A step (b, h, i) with tokens (i * bk < lengths[b]): at the very first
 * such step it starts its own block's page copies; it works out the block
 * after it (i + 1, else the next kv head, else the next sequence with a
 * non-zero length) and starts that block's copies into the other buffer;
 * waits for its own, and folds its block into o with flash attention's
 * online softmax (running max m, sum l), keys past the length masked by
 * an iota. So each block's pages travel while the step before computes.
 *
 * (samples/memory_kernels.c writes it, one async copy a page, unrolled.)
 * Where it differs from the Pallas kernel, for the device's sake:
 * - the next non-empty sequence (a lax.fori_loop there) comes from a table
 *   in SMEM scratch that the first step fills backwards in batch_size
 *   unrolled stores: the scalar core has no loops;
 * - the copies' (b, h, i, slot) live in SMEM scratch desc_ref (Mosaic
 *   keeps them in scalar registers), so the first block's copies, the
 *   next block's and the waits are one unrolled text (a job has at most
 *   256 windows);
 * - the pages are not cast to f32 before the dots: a TPU runs jax's f32
 *   dots at default precision in bf16, so q k^T is exact with bf16 q and
 *   k, and s_curr is rounded to bf16 for s_curr v, as the MXU would;
 * - o, m and l are initialised at i == 0 whatever the length, so a
 *   sequence of length 0 gives zeros (the Pallas kernel leaves that output
 *   block as it found it);
 * - a few expressions are split into in-place steps, so the body's VMEM
 *   temporaries fit the job's 16 scratch buffers.
 * Lengths need not be multiples of the block (the iota mask), and may be
 * 0; every entry of page_indices must name a page, also past the length
 * (the whole block's pages are copied, as in the Pallas kernel).
 *
 * Checked against a reference computed here: gather each sequence's pages
 * and do plain softmax(q k^T) v in double. f32 and bf16 pages; with fewer
 * than 8 query heads a kv head, q is (batch, heads, 1, head_dim) and o is
 * f32, as paged_attention() arranges it.
 */
#include <stdio.h>

#include "memory_kernels.h"
#include "sample_util.h"

#define NAME "paged_attention"
#define MAX_BATCH 8

struct paged_case {
	struct paged_shape s;
	int32_t lengths[MAX_BATCH];
};

static const struct paged_case cases[] = {
	/* dtype, batch, heads, kv_heads, head_dim, page_size, total_pages,
	 * pages_per_seq, pages_per_block; lengths */
	{ { TPURT_F32, 2, 4, 2, 128, 16, 24, 8, 4 }, { 100, 37 } },
	{ { TPURT_BF16, 3, 8, 1, 128, 16, 30, 8, 2 }, { 128, 1, 70 } },
	{ { TPURT_BF16, 4, 8, 8, 128, 64, 20, 4, 2 }, { 0, 200, 256, 0 } },
	{ { TPURT_F32, 1, 2, 2, 64, 32, 3, 2, 2 }, { 64 } },	/* one block */
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static bool run_case(struct tpurt_device *dev,
		     const struct tpurt_device_info *info, size_t ci)
{
	const struct paged_case *c = &cases[ci];
	const struct paged_shape *s = &c->s;
	struct tpurt_job_stats st;
	bool correct;

	printf("%s: %s pages of %lld tokens, batch %lld, heads %lld (kv %lld), head_dim %lld, "
	       "%lld pages a block, lengths", NAME, tpurt_dtype_name(s->dtype),
	       (long long)s->page_size, (long long)s->batch, (long long)s->heads,
	       (long long)s->kv_heads, (long long)s->head_dim,
	       (long long)s->pages_per_block);
	for (int64_t b = 0; b < s->batch; b++)
		printf(" %d", c->lengths[b]);
	printf("\n");
	if (paged_run(dev, s, c->lengths, 0, &st, &correct)) {
		printf("  run: %s\n", tpurt_last_error());
		return false;
	}
	sample_report_memory(&st);
	printf("  %.1f MFLOP: modeled %.1f GFLOP/s\n", paged_flops(s, c->lengths) / 1e6,
	       paged_flops(s, c->lengths) / (st.model_time_ps * 1e-12) / 1e9);
	return correct;
}

int main(void)
{
	return sample_run_cases(NAME, NCASES, run_case);
}
