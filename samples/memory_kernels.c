// SPDX-License-Identifier: MIT
/*
 * The memory model's kernels as Pallas statements (see memory_kernels.h),
 * and their references. Kernel bodies are straight-line code with pl.when
 * predicates, so the Python loops of the originals (one async copy per
 * page) are unrolled here, in C, into lines of text.
 */
#include "memory_kernels.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "sample_util.h"

#define LL(x) ((long long)(x))

/* @gs, or NULL (and @gs freed) if building it failed (@ret). */
static struct tpurt_grid_spec *spec_done(struct tpurt_grid_spec *gs, int ret)
{
	if (ret) {
		tpurt_grid_spec_free(gs);
		return NULL;
	}
	return gs;
}

/* An input left in HBM: pl.BlockSpec(memory_space=pl.ANY). */
static int add_hbm_input(struct tpurt_grid_spec *gs, const char *name,
			 enum tpurt_dtype dtype)
{
	struct tpurt_block_spec any = { .memory_space = TPURT_ANY };

	return tpurt_grid_spec_add_input(gs, name, &any) ||
	       tpurt_grid_spec_set_dtype(gs, name, dtype);
}

/* --- manual_pipeline --- */

struct tpurt_grid_spec *mp_spec(const struct mp_shape *s)
{
	int64_t grid[1] = { s->rows / s->bm };
	int64_t buf[3] = { 2, s->bm, s->cols }, sems[1] = { 2 };
	struct tpurt_block_spec os = { .rank = 2, .shape = { s->bm, s->cols },
				       .index_map = "i -> i, 0" };
	struct tpurt_grid_spec *gs;

	if (s->rows % s->bm || tpurt_grid_spec_create(1, grid, &gs))
		return NULL;
	return spec_done(gs,
		add_hbm_input(gs, "x_hbm", s->dtype) ||
		add_hbm_input(gs, "y_hbm", s->dtype) ||
		tpurt_grid_spec_add_output(gs, "o_ref", &os) ||
		tpurt_grid_spec_set_dtype(gs, "o_ref", s->dtype) ||
		tpurt_grid_spec_add_scratch(gs, "x_buf", TPURT_VMEM, s->dtype, 3, buf) ||
		tpurt_grid_spec_add_scratch(gs, "y_buf", TPURT_VMEM, s->dtype, 3, buf) ||
		tpurt_grid_spec_add_scratch(gs, "sem", TPURT_SEMAPHORE_DMA,
					    TPURT_INT32, 1, sems));
}

/* x's and y's copies of block @blk into slot @slot: @what "start" or "wait". */
static void mp_copies(struct kernel_text *t, const char *in, const char *blk,
		      const char *slot, const char *what)
{
	static const char *const src[2] = { "x", "y" };

	for (int a = 0; a < 2; a++)
		kernel_line(t, in, "pltpu.make_async_copy(%s_hbm.at[pl.ds(%s, bm)], %s_buf.at[%s], sem.at[%s]).%s()",
			    src[a], blk, src[a], slot, slot, what);
}

int mp_kernel(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
	      const struct mp_shape *s, unsigned int flags)
{
	struct kernel_text *t = kernel_text_new();
	const char *add = "o_ref[...] = x_buf.at[slot][...] + y_buf.at[slot][...]";

	kernel_line(t, "", "bm = %lld", LL(s->bm));
	kernel_line(t, "", "i = pl.program_id(0)");
	kernel_line(t, "", "slot = i %% 2");
	/* The first block has no step before it to start its copy. */
	if (!(flags & MP_NO_PROLOGUE)) {
		kernel_line(t, "", "@pl.when(i == 0)");
		kernel_line(t, "", "def _():");
		mp_copies(t, "    ", "0", "0", "start");
	}
	if (flags & MP_READ_BEFORE_WAIT)
		kernel_line(t, "", "%s", add);
	mp_copies(t, "", "i * bm", "slot", "wait");
	/* Block i + 1 moves into the other slot while this step adds. */
	kernel_line(t, "", "@pl.when(i + 1 < pl.num_programs(0))");
	kernel_line(t, "", "def _():");
	mp_copies(t, "    ", "(i + 1) * bm", "1 - slot", "start");
	if (!(flags & MP_READ_BEFORE_WAIT))
		kernel_line(t, "", "%s", add);
	return kernel_text_lower(k, gs, t, "mp_kernel");
}

struct tpurt_compiler_params mp_params(unsigned int flags)
{
	struct tpurt_compiler_params p = {
		.dimension_semantics = "arbitrary",
		.flags = flags,
	};

	return p;
}

int mp_run(struct tpurt_device *dev, const struct mp_shape *s,
	   unsigned int kflags, unsigned int flags, struct tpurt_job_stats *st,
	   bool *correct)
{
	struct tpurt_compiler_params params = mp_params(flags);
	struct tpurt_grid_spec *gs = mp_spec(s);
	struct tpurt_array *x = NULL, *y = NULL, *o = NULL;
	struct tpurt_kernel *k = NULL;
	size_t n = s->rows * s->cols;
	void *hx = NULL, *hy = NULL, *ho = NULL;
	double *want = malloc(n * sizeof(double));
	int ret = -1;

	*correct = false;
	if (!gs || !want || tpurt_kernel_create(&k) || mp_kernel(k, gs, s, kflags))
		goto out;
	x = sample_array(dev, s->dtype, s->rows, s->cols, 11, &hx);
	y = sample_array(dev, s->dtype, s->rows, s->cols, 12, &hy);
	if (!x || !y ||
	    tpurt_array_create(dev, s->dtype, 2, (int64_t[]){ s->rows, s->cols }, &o))
		goto out;
	ret = tpurt_pallas_call(k, gs, &params,
				(struct tpurt_array *[]){ x, y, o }, 3, st);
	if (ret || !(ho = sample_read(o)))
		goto out;
	for (size_t i = 0; i < n; i++)
		want[i] = sample_get(hx, s->dtype, i) + sample_get(hy, s->dtype, i);
	/* one rounding of the sum to the output's dtype */
	*correct = sample_check_close("o", ho, s->dtype, want, n, 0,
				      s->dtype == TPURT_BF16 ? 4e-3 : 1e-7);
out:
	free(hx), free(hy), free(ho), free(want);
	tpurt_array_free(x), tpurt_array_free(y), tpurt_array_free(o);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	return ret;
}

/* --- sparse_dsd --- */

/* X's sparsity: the non-zero blocks in grouped-row order. */
struct dsd_blocks {
	int64_t nblocks;
	int32_t *indices_i, *indices_k;	/* [nblocks] */
};

static void dsd_blocks_free(struct dsd_blocks *b)
{
	free(b->indices_i);
	free(b->indices_k);
	*b = (struct dsd_blocks){ 0 };
}

/*
 * The '1' blocks of @mask ((m / bm) rows of (k / bk) '0' or '1') in
 * grouped-row order, as the kernel needs them; false when there are none,
 * the mask is short or out of memory.
 */
static bool dsd_blocks_from_mask(const struct dsd_shape *s, const char *mask,
				 struct dsd_blocks *b)
{
	int64_t gi = s->m / s->bm, gk = s->k / s->bk, n = 0;

	if (strlen(mask) != (size_t)(gi * gk))
		return false;
	for (int64_t x = 0; x < gi * gk; x++)
		n += mask[x] == '1';
	*b = (struct dsd_blocks){ n, malloc(n * sizeof(int32_t)),
				  malloc(n * sizeof(int32_t)) };
	if (!n || !b->indices_i || !b->indices_k) {
		dsd_blocks_free(b);
		return false;
	}
	n = 0;
	for (int64_t i = 0; i < gi; i++)	/* grouped by row, as the kernel needs */
		for (int64_t kk = 0; kk < gk; kk++)
			if (mask[i * gk + kk] == '1') {
				b->indices_i[n] = (int32_t)i;
				b->indices_k[n++] = (int32_t)kk;
			}
	return true;
}

struct tpurt_grid_spec *dsd_spec(const struct dsd_shape *s, int64_t nblocks)
{
	int64_t grid[2] = { s->n / s->bn, nblocks }, acc[2] = { s->bm, s->bn };
	struct tpurt_block_spec xs = {
		.rank = 3, .shape = { 1, s->bm, s->bk },
		.index_map = "j, blk_idx, blk_idxs_i, blk_idxs_k -> blk_idx, 0, 0" };
	struct tpurt_block_spec ys = {
		.rank = 2, .shape = { s->bk, s->bn },
		.index_map = "j, blk_idx, blk_idxs_i, blk_idxs_k -> blk_idxs_k[blk_idx], j" };
	struct tpurt_block_spec os = {
		.rank = 2, .shape = { s->bm, s->bn },
		.index_map = "j, blk_idx, blk_idxs_i, blk_idxs_k -> blk_idxs_i[blk_idx], j" };
	static const char *const names[] = { "x_ref", "y_ref", "zeros_ref", "o_ref" };
	struct tpurt_grid_spec *gs;
	int ret;

	if (tpurt_grid_spec_create(2, grid, &gs))
		return NULL;
	ret = tpurt_grid_spec_add_scalar_prefetch(gs, "idxs_i_ref") ||
	      tpurt_grid_spec_add_scalar_prefetch(gs, "idxs_k_ref") ||
	      tpurt_grid_spec_add_input(gs, "x_ref", &xs) ||
	      tpurt_grid_spec_add_input(gs, "y_ref", &ys) ||
	      /* the zeros array input_output_aliases makes the output */
	      tpurt_grid_spec_add_input(gs, "zeros_ref", &os) ||
	      tpurt_grid_spec_add_output(gs, "o_ref", &os) ||
	      tpurt_grid_spec_add_scratch(gs, "accum_scratch", TPURT_VMEM,
					  TPURT_F32, 2, acc);
	for (int i = 0; !ret && i < 4; i++)
		ret = tpurt_grid_spec_set_dtype(gs, names[i], s->dtype);
	return spec_done(gs, ret);
}

int dsd_kernel(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
	       int64_t nblocks)
{
	struct kernel_text *t = kernel_text_new();

	kernel_line(t, "", "num_blocks = %lld", LL(nblocks));
	kernel_line(t, "", "blk_idx = pl.program_id(1)");
	kernel_line(t, "", "@pl.when((blk_idx == 0) | (idxs_i_ref[blk_idx] != idxs_i_ref[jnp.maximum(blk_idx - 1, 0)]))");
	kernel_line(t, "", "def _():");
	kernel_line(t, "    ", "accum_scratch[...] = jnp.zeros_like(accum_scratch)");
	/* x_ref[0, :, :]: the (1, bm, bk) block is the 2-D (bm, bk) ref here */
	kernel_line(t, "", "accum_scratch[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)");
	/*
	 * As the doc: idxs_i_ref[jnp.minimum(blk_idx + 1, num_blocks)] is one
	 * past the end at the last step, which reads idxs_k_ref[0] (the device,
	 * as Mosaic, reads the SMEM word there: TPU_INSN_LOAD_SMEM); is_end
	 * writes the last row out whatever it compares to.
	 */
	kernel_line(t, "", "@pl.when((blk_idx == num_blocks - 1) | (idxs_i_ref[blk_idx] != idxs_i_ref[jnp.minimum(blk_idx + 1, num_blocks)]))");
	kernel_line(t, "", "def _():");
	kernel_line(t, "    ", "o_ref[...] = accum_scratch[...].astype(o_ref.dtype)");
	return kernel_text_lower(k, gs, t, "dsd_kernel");
}

struct tpurt_compiler_params dsd_params(unsigned int flags)
{
	static const struct tpurt_alias zeros_is_output[1] = { { 4, 0 } };
	struct tpurt_compiler_params p = {
		.flags = flags,
		.input_output_aliases = zeros_is_output,
		.num_aliases = 1,
	};

	return p;
}

/* out = X @ Y in double from X's blocks; zero where no block reaches. */
static void dsd_reference(const struct dsd_shape *s, const struct dsd_blocks *b,
			  const float *x_blocks, const float *y, double *out)
{
	memset(out, 0, s->m * s->n * sizeof(double));
	for (int64_t blk = 0; blk < b->nblocks; blk++) {
		const float *xb = x_blocks + blk * s->bm * s->bk;
		int64_t r0 = b->indices_i[blk] * s->bm, k0 = b->indices_k[blk] * s->bk;

		for (int64_t r = 0; r < s->bm; r++)
			for (int64_t p = 0; p < s->bk; p++) {
				double x = xb[r * s->bk + p];
				const float *yr = y + (k0 + p) * s->n;
				double *o = out + (r0 + r) * s->n;

				for (int64_t c = 0; c < s->n; c++)
					o[c] += x * yr[c];
			}
	}
}

static struct tpurt_array *int32_array(struct tpurt_device *dev, int64_t n,
				       const int32_t *vals)
{
	struct tpurt_array *a;
	int32_t zero = 0;

	if (tpurt_array_create(dev, TPURT_INT32, 1, &n, &a))
		return NULL;
	if (tpurt_array_write(a, vals ? vals : &zero)) {
		tpurt_array_free(a);
		return NULL;
	}
	return a;
}

/* Output rows of block rows with no X block: exactly zero (the alias's). */
static bool empty_rows_zero(const struct dsd_shape *s, const char *mask,
			    const void *o)
{
	int64_t gk = s->k / s->bk;

	for (int64_t bi = 0; bi < s->m / s->bm; bi++) {
		if (strspn(mask + bi * gk, "0") < (size_t)gk)
			continue;
		for (int64_t e = bi * s->bm * s->n; e < (bi + 1) * s->bm * s->n; e++)
			if (sample_get(o, s->dtype, e) != 0) {
				printf("  o[%lld, %lld] = %g in block row %lld, which has no X block\n",
				       LL(e / s->n), LL(e % s->n),
				       sample_get(o, s->dtype, e), LL(bi));
				return false;
			}
		printf("  block row %lld (no X block): zero\n", LL(bi));
	}
	return true;
}

int dsd_run(struct tpurt_device *dev, const struct dsd_shape *s,
	    const char *mask, unsigned int flags, struct tpurt_job_stats *st,
	    bool *correct)
{
	struct tpurt_compiler_params params = dsd_params(flags);
	struct dsd_blocks b = { 0 };
	struct tpurt_grid_spec *gs = NULL;
	struct tpurt_kernel *k = NULL;
	struct tpurt_array *ii = NULL, *kk = NULL, *x = NULL, *y = NULL, *z = NULL;
	float *hx = NULL, *hy = NULL;
	double *want = malloc(s->m * s->n * sizeof(double));
	size_t nx;
	void *ho = NULL;
	int ret = -1;

	*correct = false;
	if (!want || !dsd_blocks_from_mask(s, mask, &b))
		goto out;
	nx = b.nblocks * s->bm * s->bk;
	gs = dsd_spec(s, b.nblocks);
	if (!gs || tpurt_kernel_create(&k) || dsd_kernel(k, gs, b.nblocks))
		goto out;
	hx = random_values(nx, 1.0f, s->dtype, 21);
	hy = random_values(s->k * s->n, 1.0f, s->dtype, 22);
	if (!hx || !hy)
		goto out;
	ii = int32_array(dev, b.nblocks, b.indices_i);
	kk = int32_array(dev, b.nblocks, b.indices_k);
	x = sample_array_of(dev, s->dtype, 3,
			    (int64_t[]){ b.nblocks, s->bm, s->bk }, hx, NULL);
	y = sample_array_of(dev, s->dtype, 2, (int64_t[]){ s->k, s->n }, hy, NULL);
	if (!ii || !kk || !x || !y ||
	    tpurt_array_create(dev, s->dtype, 2, (int64_t[]){ s->m, s->n }, &z) ||
	    tpurt_array_fill(z, 0))
		goto out;
	/* the output is the zeros array itself: input_output_aliases */
	ret = tpurt_pallas_call(k, gs, &params,
				(struct tpurt_array *[]){ ii, kk, x, y, z, z }, 6, st);
	if (ret || !(ho = sample_read(z)))
		goto out;
	dsd_reference(s, &b, hx, hy, want);
	*correct = sample_check_close("o", ho, s->dtype, want, s->m * s->n,
				      s->dtype == TPURT_BF16 ? 1e-3 : 1e-4,
				      s->dtype == TPURT_BF16 ? 4e-3 : 1e-5) &&
		   empty_rows_zero(s, mask, ho);
out:
	free(want), free(hx), free(hy), free(ho);
	tpurt_array_free(ii), tpurt_array_free(kk), tpurt_array_free(x);
	tpurt_array_free(y), tpurt_array_free(z);
	tpurt_kernel_free(k);
	tpurt_grid_spec_free(gs);
	dsd_blocks_free(&b);
	return ret;
}

/* --- paged_attention --- */

/* The Pallas kernel's DEFAULT_MASK_VALUE, -0.7 * float32 max. */
#define MASK_VALUE	((float)(-0.7 * FLT_MAX))

/*
 * The kernel's scalars that Mosaic keeps in registers live in one SMEM
 * scratch, desc_ref (one: a job has 16 scratch buffers, and the body's
 * temporaries take most of them). [0, 4): the (b, h, i, slot) of the
 * block the MultiPageAsyncCopyDescriptor copies: create_kv_async_copy_
 * descriptors(b, h, i, buffer_index) as data, so the unrolled copies of
 * the first block, the next block and the waits are one text, one set of
 * windows (a job has 256). From NEXT_BATCH: the next sequence with a
 * non-zero length after each b.
 */
#define NEXT_BATCH	4

static int64_t group(const struct paged_shape *s)
{
	return s->heads / s->kv_heads;
}

enum tpurt_dtype paged_out_dtype(const struct paged_shape *s)
{
	return group(s) % 8 ? TPURT_F32 : s->dtype;
}

/*
 * As paged_attention() does: with fewer than 8 (or not a multiple of 8)
 * query heads a kv head, q becomes (batch, heads, 1, head_dim), so the
 * block's last two dimensions are (1, head_dim), whole, which Pallas TPU's
 * (8, 128) tiling allows.
 */
int paged_q_shape(const struct paged_shape *s, int64_t *shape)
{
	shape[0] = s->batch, shape[1] = s->heads;
	if (group(s) % 8 == 0) {
		shape[2] = s->head_dim;
		return 3;
	}
	shape[2] = 1, shape[3] = s->head_dim;
	return 4;
}

/* A block of q, o (@col: head_dim) or m, l (@col: 1): (None, G, [None,] col). */
static struct tpurt_block_spec q_block(const struct paged_shape *s, int64_t col)
{
	struct tpurt_block_spec b = { .rank = 3,
				      .shape = { TPURT_SQUEEZED, group(s), col },
				      .index_map = "b, h, i -> b, h, 0" };

	if (group(s) % 8)
		b = (struct tpurt_block_spec){
			.rank = 4,
			.shape = { TPURT_SQUEEZED, group(s), TPURT_SQUEEZED, col },
			.index_map = "b, h, i -> b, h, 0, 0" };
	return b;
}

struct tpurt_grid_spec *paged_spec(const struct paged_shape *s)
{
	int64_t grid[3] = { s->batch, s->kv_heads,
			    s->pages_per_seq / s->pages_per_block };
	int64_t buf[4] = { 2, s->pages_per_block, s->page_size, s->head_dim };
	int64_t one[1] = { 1 }, scalars[1] = { NEXT_BATCH + s->batch };
	struct tpurt_block_spec qs = q_block(s, s->head_dim), ml = q_block(s, 1);
	struct tpurt_grid_spec *gs;

	if (s->pages_per_seq % s->pages_per_block || s->heads % s->kv_heads ||
	    tpurt_grid_spec_create(3, grid, &gs))
		return NULL;
	return spec_done(gs,
		tpurt_grid_spec_set_index_names(gs, "b, h, i") ||
		tpurt_grid_spec_add_scalar_prefetch(gs, "lengths_ref") ||
		tpurt_grid_spec_add_scalar_prefetch(gs, "page_indices_ref") ||
		tpurt_grid_spec_add_scalar_prefetch(gs, "buffer_index_ref") ||
		tpurt_grid_spec_add_scalar_prefetch(gs, "step_ref") ||
		tpurt_grid_spec_add_input(gs, "q_ref", &qs) ||
		tpurt_grid_spec_set_dtype(gs, "q_ref", s->dtype) ||
		add_hbm_input(gs, "k_pages_hbm_ref", s->dtype) ||
		add_hbm_input(gs, "v_pages_hbm_ref", s->dtype) ||
		tpurt_grid_spec_add_output(gs, "o_ref", &qs) ||
		tpurt_grid_spec_set_dtype(gs, "o_ref", paged_out_dtype(s)) ||
		tpurt_grid_spec_add_output(gs, "m_ref", &ml) ||
		tpurt_grid_spec_set_dtype(gs, "m_ref", TPURT_F32) ||
		tpurt_grid_spec_add_output(gs, "l_ref", &ml) ||
		tpurt_grid_spec_set_dtype(gs, "l_ref", TPURT_F32) ||
		tpurt_grid_spec_add_scratch(gs, "k_vmem_buffer", TPURT_VMEM,
					    s->dtype, 4, buf) ||
		tpurt_grid_spec_add_scratch(gs, "v_vmem_buffer", TPURT_VMEM,
					    s->dtype, 4, buf) ||
		tpurt_grid_spec_add_scratch(gs, "sem", TPURT_SEMAPHORE_DMA,
					    TPURT_INT32, 1, one) ||
		/* the kernel's scalars that Mosaic keeps in registers */
		tpurt_grid_spec_add_scratch(gs, "desc_ref", TPURT_SMEM,
					    TPURT_INT32, 1, scalars));
}

/*
 * MultiPageAsyncCopyDescriptor: one async copy a page of the block that
 * desc_ref names, of k and v (@kv "k", "v" or "kv") into their buffers'
 * slot desc_ref[3], all on one semaphore, started ("start") or waited for
 * ("wait").
 */
static void page_copies(struct kernel_text *t, const char *in,
			const struct paged_shape *s, const char *kv,
			const char *what)
{
	for (const char *c = kv; *c; c++)
		for (int64_t j = 0; j < s->pages_per_block; j++)
			kernel_line(t, in, "pltpu.make_async_copy(%c_pages_hbm_ref.at[desc_ref[1], page_indices_ref[desc_ref[0] * pages_per_sequence + desc_ref[2] * pages_per_compute_block + %lld]], %c_vmem_buffer.at[desc_ref[3], %lld], sem).%s()",
				    *c, LL(j), *c, LL(j), what);
}

/* desc_ref = (b, h, i, slot): the descriptor of a block. */
static void describe(struct kernel_text *t, const char *in, const char *b,
		     const char *h, const char *i, const char *slot)
{
	kernel_line(t, in, "desc_ref[0] = %s", b);
	kernel_line(t, in, "desc_ref[1] = %s", h);
	kernel_line(t, in, "desc_ref[2] = %s", i);
	kernel_line(t, in, "desc_ref[3] = %s", slot);
}

/*
 * compute_block_indices(b, h, i + 1): the block after this one is (b, h,
 * i + 1) while i + 1 has tokens, else (b, h + 1, 0), else block 0 of the
 * next sequence with a non-zero length; its slot the other buffer.
 */
static void next_block_lines(struct kernel_text *t, const char *in)
{
	char in2[16], in3[16];

	snprintf(in2, sizeof(in2), "%s    ", in);
	snprintf(in3, sizeof(in3), "%s        ", in);
	describe(t, in, "b", "h", "i + 1", "1 - buffer_index");
	kernel_line(t, in, "@pl.when((i + 1) * bk >= length)");
	kernel_line(t, in, "def advance_h():");
	kernel_line(t, in2, "desc_ref[1] = h + 1");
	kernel_line(t, in2, "desc_ref[2] = 0");
	kernel_line(t, in2, "@pl.when(h + 1 >= num_kv_heads)");
	kernel_line(t, in2, "def advance_b():");
	kernel_line(t, in3, "desc_ref[0] = desc_ref[%d + b]", NEXT_BATCH);
	kernel_line(t, in3, "desc_ref[1] = 0");
}

/*
 * advance_to_next_non_zero_length, a fori_loop in the Pallas kernel: the
 * scalar core has no loops, so at the first step the kernel tabulates
 * desc_ref[NEXT_BATCH + b], the first b' > b with lengths_ref[b'] > 0
 * (or batch_size), backwards in batch_size unrolled stores.
 */
static void next_batch_lines(struct kernel_text *t, const struct paged_shape *s)
{
	kernel_line(t, "", "@pl.when((b == 0) & (h == 0) & (i == 0))");
	kernel_line(t, "", "def tabulate_next_batch():");
	kernel_line(t, "    ", "desc_ref[%lld] = batch_size",
		    LL(NEXT_BATCH + s->batch - 1));
	for (int64_t b = s->batch - 2; b >= 0; b--) {
		kernel_line(t, "    ", "desc_ref[%lld] = %lld", LL(NEXT_BATCH + b),
			    LL(b + 1));
		kernel_line(t, "    ", "@pl.when(lengths_ref[%lld] == 0)", LL(b + 1));
		kernel_line(t, "    ", "def _():");
		kernel_line(t, "        ", "desc_ref[%lld] = desc_ref[%lld]",
			    LL(NEXT_BATCH + b), LL(NEXT_BATCH + b + 1));
	}
}

int paged_kernel(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		 const struct paged_shape *s)
{
	struct kernel_text *t = kernel_text_new();
	const char *in = "    ";
	long long g = LL(group(s)), bk = LL(s->pages_per_block * s->page_size);
	bool f32 = s->dtype == TPURT_F32;

	kernel_line(t, "", "batch_size = %lld", LL(s->batch));
	kernel_line(t, "", "num_kv_heads = %lld", LL(s->kv_heads));
	kernel_line(t, "", "pages_per_sequence = %lld", LL(s->pages_per_seq));
	kernel_line(t, "", "pages_per_compute_block = %lld", LL(s->pages_per_block));
	kernel_line(t, "", "bk = %lld", bk);
	kernel_line(t, "", "b = pl.program_id(0)");
	kernel_line(t, "", "h = pl.program_id(1)");
	kernel_line(t, "", "i = pl.program_id(2)");
	kernel_line(t, "", "length = lengths_ref[b]");
	kernel_line(t, "", "step = step_ref[0]");
	kernel_line(t, "", "buffer_index = buffer_index_ref[0]");
	next_batch_lines(t, s);
	/*
	 * init: at i == 0 whatever the length (the Pallas kernel does it
	 * under i * bk < length), so a sequence of length 0 gives zeros,
	 * not the output block's uninitialised VMEM.
	 */
	kernel_line(t, "", "@pl.when(i == 0)");
	kernel_line(t, "", "def init():");
	kernel_line(t, in, "m_ref[...] = jnp.full_like(m_ref, -jnp.inf)");
	kernel_line(t, in, "l_ref[...] = jnp.zeros_like(l_ref)");
	kernel_line(t, in, "o_ref[...] = jnp.zeros_like(o_ref)");

	kernel_line(t, "", "@pl.when(i * bk < length)");
	kernel_line(t, "", "def flash_attention():");
	kernel_line(t, in, "@pl.when(step == 0)");
	kernel_line(t, in, "def prefetch_first_block():");
	describe(t, "        ", "b", "h", "i", "buffer_index");
	page_copies(t, "        ", s, "kv", "start");
	next_block_lines(t, in);
	kernel_line(t, in, "@pl.when(desc_ref[0] < batch_size)");
	kernel_line(t, in, "def prefetch_next_block():");
	page_copies(t, "        ", s, "kv", "start");
	kernel_line(t, "        ", "buffer_index_ref[0] = desc_ref[3]");
	/* this block's descriptor again: the slot is the other one's */
	describe(t, in, "b", "h", "i", "1 - desc_ref[3]");
	page_copies(t, in, s, "k", "wait");
	/*
	 * The body's values live in VMEM temporaries, and with the 4
	 * scratch buffers a job has room for 12 (16 in all). So the Pallas
	 * kernel's expressions are split where a statement can then update
	 * its value in place (qk - m_curr, m_prev - m_next, ...), m_prev and
	 * l_prev are m_ref[...] and l_ref[...] read in place before their
	 * stores.
	 *
	 * And the dots read the pages where the copies put them:
	 * wait_and_get_loaded() casts the buffers to f32 (copies), but a TPU
	 * runs jax's f32 dots at default precision on the MXU in bf16, so for
	 * bf16 pages q k^T is the same with bf16 q and k (exact), and s_curr v
	 * rounds s_curr to bf16 as the MXU would. The copies would cost the
	 * engine more than the rest of the step.
	 */
	/* jnp.einsum('hd,td->ht', q, k) */
	kernel_line(t, in, "qk = jnp.dot(q_ref[...], k_vmem_buffer.at[desc_ref[3]][...].T, preferred_element_type=jnp.float32)");
	kernel_line(t, in, "mask = i * bk + lax.broadcasted_iota(jnp.int32, (%lld, %lld), 1) < length",
		    g, bk);
	/*
	 * qk + jnp.where(mask, 0.0, mask_value) is mask_value itself where
	 * masked (|qk| is far below mask_value's ulp), so select it. The
	 * exact decimal: the device's immediates are binary32.
	 */
	kernel_line(t, in, "qk = jnp.where(mask, qk, %.0f)", MASK_VALUE);
	kernel_line(t, in, "m_curr = jnp.max(qk, axis=1, keepdims=True)");
	kernel_line(t, in, "qk = qk - m_curr");
	kernel_line(t, in, "s_curr = jnp.exp(qk)");
	kernel_line(t, in, "m_next = jnp.maximum(m_ref[...], m_curr)");
	kernel_line(t, in, "alpha = m_ref[...] - m_next");
	kernel_line(t, in, "alpha = jnp.exp(alpha)");
	kernel_line(t, in, "beta = m_curr - m_next");
	kernel_line(t, in, "beta = jnp.exp(beta)");
	kernel_line(t, in, "m_ref[...] = m_next");
	kernel_line(t, in, "l_prev_alpha = l_ref[...] * alpha");
	kernel_line(t, in, "l_curr = jnp.sum(s_curr, axis=1, keepdims=True)");
	kernel_line(t, in, "l_next = beta * l_curr");
	kernel_line(t, in, "l_next = l_next + l_prev_alpha");
	kernel_line(t, in, "l_ref[...] = jnp.where(l_next == 0.0, 1.0, l_next)");	/* l_next_safe */
	page_copies(t, in, s, "v", "wait");
	kernel_line(t, in, "o_curr_times_l_curr = jnp.dot(s_curr%s, v_vmem_buffer.at[desc_ref[3]][...], preferred_element_type=jnp.float32)",
		    f32 ? "" : ".astype(jnp.bfloat16)");
	kernel_line(t, in, "o_curr_times_l_curr = o_curr_times_l_curr * beta");
	kernel_line(t, in, "o_ref[...] = ((l_prev_alpha * o_ref[...] + o_curr_times_l_curr) / l_ref[...]).astype(o_ref.dtype)");
	kernel_line(t, in, "step_ref[0] = step + 1");
	return kernel_text_lower(k, gs, t, "paged_kernel");
}

struct tpurt_compiler_params paged_params(unsigned int flags)
{
	/* the next block's copies start in this step: the steps run in order */
	struct tpurt_compiler_params p = {
		.dimension_semantics = "arbitrary, arbitrary, arbitrary",
		.flags = flags,
	};

	return p;
}

int paged_arrays(struct tpurt_device *dev, const struct paged_shape *s,
		 const int32_t *lengths, const int32_t *page_indices,
		 const float *q, const float *k, const float *v,
		 struct tpurt_array *args[10])
{
	int64_t qshape[4], mshape[4];
	int64_t pshape[4] = { s->kv_heads, s->total_pages, s->page_size,
			      s->head_dim };
	int qrank = paged_q_shape(s, qshape);
	bool ok;

	memcpy(mshape, qshape, sizeof(mshape));
	mshape[qrank - 1] = 1;
	memset(args, 0, 10 * sizeof(*args));
	args[0] = int32_array(dev, s->batch, lengths);
	args[1] = int32_array(dev, s->batch * s->pages_per_seq, page_indices);
	args[2] = int32_array(dev, 1, NULL);
	args[3] = int32_array(dev, 1, NULL);
	args[4] = sample_array_of(dev, s->dtype, qrank, qshape, q, NULL);
	args[5] = sample_array_of(dev, s->dtype, 4, pshape, k, NULL);
	args[6] = sample_array_of(dev, s->dtype, 4, pshape, v, NULL);
	ok = !tpurt_array_create(dev, paged_out_dtype(s), qrank, qshape, &args[7]) &&
	     !tpurt_array_create(dev, TPURT_F32, qrank, mshape, &args[8]) &&
	     !tpurt_array_create(dev, TPURT_F32, qrank, mshape, &args[9]);
	for (int a = 0; ok && a < 7; a++)
		ok = args[a] != NULL;
	if (!ok) {
		paged_arrays_free(args);
		return -1;
	}
	return 0;
}

void paged_arrays_free(struct tpurt_array *args[10])
{
	for (int a = 0; a < 10; a++) {
		tpurt_array_free(args[a]);
		args[a] = NULL;
	}
}

void paged_reference(const struct paged_shape *s, const int32_t *lengths,
		     const int32_t *page_indices, const float *q,
		     const float *k, const float *v, double *out)
{
	int64_t d = s->head_dim, page = s->page_size * d;
	int64_t head = s->total_pages * page;
	double *p = malloc(s->pages_per_seq * s->page_size * sizeof(double));

	for (int64_t b = 0; p && b < s->batch; b++)
		for (int64_t hh = 0; hh < s->heads; hh++) {
			const float *qr = q + (b * s->heads + hh) * d;
			int64_t kvh = hh / group(s), n = lengths[b];
			double m = -INFINITY, sum = 0, *o = out + (b * s->heads + hh) * d;

			for (int64_t c = 0; c < d; c++)
				o[c] = 0;
			for (int64_t t = 0; t < n; t++) {	/* gather token t's key */
				int64_t at = kvh * head +
					     page_indices[b * s->pages_per_seq + t / s->page_size] * page +
					     t % s->page_size * d;
				double dot = 0;

				for (int64_t c = 0; c < d; c++)
					dot += (double)qr[c] * k[at + c];
				p[t] = dot;
				m = fmax(m, dot);
			}
			for (int64_t t = 0; t < n; t++) {
				p[t] = exp(p[t] - m);
				sum += p[t];
			}
			for (int64_t t = 0; t < n; t++) {
				int64_t at = kvh * head +
					     page_indices[b * s->pages_per_seq + t / s->page_size] * page +
					     t % s->page_size * d;

				for (int64_t c = 0; c < d; c++)
					o[c] += p[t] / sum * v[at + c];
			}
		}
	free(p);
}

int32_t *paged_page_table(const struct paged_shape *s, uint32_t seed)
{
	int32_t *perm = malloc(s->total_pages * sizeof(int32_t));

	if (!perm || s->batch * s->pages_per_seq > s->total_pages) {
		free(perm);
		return NULL;
	}
	for (int64_t p = 0; p < s->total_pages; p++)
		perm[p] = (int32_t)p;
	for (int64_t p = s->total_pages - 1; p > 0; p--) {	/* Fisher-Yates */
		int64_t r;
		int32_t t;

		seed = seed * 1664525u + 1013904223u;
		r = (seed >> 8) % (p + 1);
		t = perm[p], perm[p] = perm[r], perm[r] = t;
	}
	return perm;
}

int paged_run(struct tpurt_device *dev, const struct paged_shape *s,
	      const int32_t *lengths, unsigned int flags,
	      struct tpurt_job_stats *st, bool *correct)
{
	struct tpurt_compiler_params params = paged_params(flags);
	size_t nq = s->batch * s->heads * s->head_dim;
	size_t np = s->kv_heads * s->total_pages * s->page_size * s->head_dim;
	float *q = random_values(nq, 0.25f, s->dtype, 31);
	float *k = random_values(np, 1.0f, s->dtype, 32);
	float *v = random_values(np, 1.0f, s->dtype, 33);
	int32_t *pages = paged_page_table(s, 34);
	double *want = malloc(nq * sizeof(double));
	struct tpurt_grid_spec *gs = paged_spec(s);
	struct tpurt_array *args[10] = { 0 };
	struct tpurt_kernel *kern = NULL;
	bool f32 = s->dtype == TPURT_F32, f32_out = paged_out_dtype(s) == TPURT_F32;
	void *o = NULL;
	int ret = -1;

	*correct = false;
	if (!q || !k || !v || !pages || !want || !gs ||
	    tpurt_kernel_create(&kern) || paged_kernel(kern, gs, s) ||
	    paged_arrays(dev, s, lengths, pages, q, k, v, args))
		goto out;
	ret = tpurt_pallas_call(kern, gs, &params, args, 10, st);
	if (ret || !(o = sample_read(args[7])))
		goto out;
	paged_reference(s, lengths, pages, q, k, v, want);
	/*
	 * f32 pages: f32 all through. bf16 pages: the weights are rounded to
	 * bf16 for the MXU (2^-9 relative each), and a bf16 o is rounded at
	 * every block, as the Pallas kernel's is.
	 */
	*correct = sample_check_close("o", o, paged_out_dtype(s), want, nq,
				      f32 ? 2e-5 : f32_out ? 2e-3 : 1e-2,
				      f32 ? 1e-4 : f32_out ? 4e-3 : 2e-2);
out:
	free(q), free(k), free(v), free(pages), free(want), free(o);
	paged_arrays_free(args);
	tpurt_kernel_free(kern);
	tpurt_grid_spec_free(gs);
	return ret;
}

double paged_flops(const struct paged_shape *s, const int32_t *lengths)
{
	double tokens = 0;

	for (int64_t b = 0; b < s->batch; b++)
		tokens += lengths[b];
	return 4.0 * s->heads * s->head_dim * tokens;
}
