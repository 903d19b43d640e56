// SPDX-License-Identifier: MIT
/*
 * The row softmax and flash attention kernels as Pallas statements (see
 * kernels.h), and their references.
 */
#include "kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "sample_util.h"

static const char softmax_text[] =
	"x = x_ref[...].astype(jnp.float32)\n"
	"m = jnp.max(x, axis=1, keepdims=True)\n"
	"e = jnp.exp(x - m)\n"
	"o_ref[...] = (e / jnp.sum(e, axis=1, keepdims=True)).astype(o_ref.dtype)\n";

struct tpurt_grid_spec *softmax_spec(enum tpurt_dtype dtype, int64_t rows,
				     int64_t cols, int64_t br)
{
	int64_t grid[1] = { (rows + br - 1) / br };
	struct tpurt_block_spec bs = { 2, { br, cols }, "i -> i, 0" };
	struct tpurt_grid_spec *gs;

	if (tpurt_grid_spec_create(1, grid, &gs))
		return NULL;
	if (tpurt_grid_spec_add_input(gs, "x_ref", &bs) ||
	    tpurt_grid_spec_add_output(gs, "o_ref", &bs) ||
	    tpurt_grid_spec_set_dtype(gs, "x_ref", dtype) ||
	    tpurt_grid_spec_set_dtype(gs, "o_ref", dtype)) {
		tpurt_grid_spec_free(gs);
		return NULL;
	}
	return gs;
}

int softmax_kernel(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs)
{
	return tpurt_kernel_stmts(k, gs, softmax_text);
}

void softmax_reference(const float *x, int64_t rows, int64_t cols,
		       double *out)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		double m = -INFINITY, sum = 0, *o = out + r * cols;

		for (int64_t c = 0; c < cols; c++)
			m = fmax(m, xr[c]);
		for (int64_t c = 0; c < cols; c++) {
			o[c] = exp(xr[c] - m);
			sum += o[c];
		}
		for (int64_t c = 0; c < cols; c++)
			o[c] /= sum;
	}
}

struct tpurt_grid_spec *attn_spec(const struct attn_shape *s)
{
	int64_t grid[3] = { s->bh, (s->seq + s->bq - 1) / s->bq,
			    (s->seq + s->bk - 1) / s->bk };
	int64_t col[2] = { s->bq, 1 }, acc[2] = { s->bq, s->d };
	char kv_map[96];
	struct tpurt_block_spec qs = { 3, { TPURT_SQUEEZED, s->bq, s->d },
				       "b, i, j -> b, i, 0" };
	struct tpurt_block_spec kvs = { 3, { TPURT_SQUEEZED, s->bk, s->d },
					"b, i, j -> b, j, 0" };
	static const char *const names[] = { "q", "k", "v", "o" };
	struct tpurt_grid_spec *gs;
	int ret;

	/*
	 * Causal: a key block above the diagonal is skipped; its index map
	 * stays on the last block the q block uses, so nothing is fetched
	 * for it (the Pallas kernel points it at the next block it needs).
	 */
	if (s->causal) {
		snprintf(kv_map, sizeof(kv_map),
			 "b, i, j -> b, min(j, (i * %lld + %lld) // %lld), 0",
			 (long long)s->bq, (long long)(s->bq - 1),
			 (long long)s->bk);
		kvs.index_map = kv_map;
	}
	if (tpurt_grid_spec_create(3, grid, &gs))
		return NULL;
	ret = tpurt_grid_spec_set_index_names(gs, "b, i, j") ||
	      tpurt_grid_spec_add_input(gs, "q", &qs) ||
	      tpurt_grid_spec_add_input(gs, "k", &kvs) ||
	      tpurt_grid_spec_add_input(gs, "v", &kvs) ||
	      tpurt_grid_spec_add_output(gs, "o", &qs);
	for (int i = 0; !ret && i < 4; i++)
		ret = tpurt_grid_spec_set_dtype(gs, names[i], TPURT_BF16);
	ret = ret ||
	      tpurt_grid_spec_add_scratch(gs, "m", TPURT_VMEM, TPURT_F32, 2, col) ||
	      tpurt_grid_spec_add_scratch(gs, "l", TPURT_VMEM, TPURT_F32, 2, col) ||
	      tpurt_grid_spec_add_scratch(gs, "acc", TPURT_VMEM, TPURT_F32, 2, acc);
	if (ret) {
		tpurt_grid_spec_free(gs);
		return NULL;
	}
	return gs;
}

int kernel_line(struct kernel_text *t, const char *indent, const char *fmt, ...)
{
	size_t room;
	va_list ap;
	int n;

	if (!t || t->overflow)
		return -1;
	room = sizeof(t->buf) - t->len;
	n = snprintf(t->buf + t->len, room, "%s", indent);
	if ((size_t)n + 1 >= room)
		return t->overflow = true, -1;
	va_start(ap, fmt);
	n += vsnprintf(t->buf + t->len + n, room - n, fmt, ap);
	va_end(ap);
	if ((size_t)n + 1 >= room)
		return t->overflow = true, -1;
	t->len += n;
	t->buf[t->len++] = '\n';
	t->buf[t->len] = 0;
	return 0;
}

struct kernel_text *kernel_text_new(void)
{
	return calloc(1, sizeof(struct kernel_text));
}

int kernel_text_lower(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		      struct kernel_text *t, const char *who)
{
	int ret = -1;

	if (!t || t->overflow)
		fprintf(stderr, "%s: %s\n", who,
			t ? "kernel text too long" : "out of memory");
	else
		ret = tpurt_kernel_stmts(k, gs, t->buf);
	free(t);
	return ret;
}

/*
 * One k step (the Pallas library's kernel body, with the output divided
 * by l once at the end): masked scores, the new row max, p, l and acc
 * rescaled by exp(m_prev - m_new).
 */
static int step_lines(struct kernel_text *t, const char *in, const struct attn_shape *s)
{
	long long bq = s->bq, bk = s->bk;
	int ret = kernel_line(t, in, "s = jnp.dot(q[...], k[...].T, preferred_element_type=jnp.float32) * %.9g",
		       1 / sqrt((double)s->d));

	if (s->causal || s->seq % s->bk)
		ret = ret || kernel_line(t, in, "k_ids = lax.broadcasted_iota(jnp.int32, (%lld, %lld), 1) + pl.program_id(2) * %lld",
				  bq, bk, bk);
	if (s->causal)
		ret = ret ||
		      kernel_line(t, in, "q_ids = lax.broadcasted_iota(jnp.int32, (%lld, %lld), 0) + pl.program_id(1) * %lld",
			   bq, bk, bq) ||
		      kernel_line(t, in, "s = jnp.where(k_ids <= q_ids, s, -jnp.inf)");
	else if (s->seq % s->bk)	/* the edge block's zero padding */
		ret = ret || kernel_line(t, in, "s = jnp.where(k_ids < %lld, s, -jnp.inf)",
				  (long long)s->seq);
	return ret ||
	       kernel_line(t, in, "m_new = jnp.maximum(m[...], jnp.max(s, axis=1, keepdims=True))") ||
	       kernel_line(t, in, "alpha = jnp.exp(m[...] - m_new)") ||
	       kernel_line(t, in, "p = jnp.exp(s - m_new)") ||
	       kernel_line(t, in, "l[...] = alpha * l[...] + jnp.sum(p, axis=1, keepdims=True)") ||
	       kernel_line(t, in, "acc[...] = acc[...] * alpha") ||
	       kernel_line(t, in, "acc[...] += jnp.dot(p.astype(v.dtype), v[...], preferred_element_type=jnp.float32)") ||
	       kernel_line(t, in, "m[...] = m_new");
}

int attn_kernel(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
		const struct attn_shape *s, unsigned int flags)
{
	const char *in = s->causal ? "    " : "";
	struct kernel_text *t = kernel_text_new();
	int ret;

	ret = kernel_line(t, "", "@pl.when(pl.program_id(2) == 0)") ||
	      kernel_line(t, "", "def _():") ||
	      kernel_line(t, "    ", "acc[...] = jnp.zeros_like(acc)");
	if (!(flags & ATTN_SKIP_INIT_M))
		ret = ret || kernel_line(t, "    ", "m[...] = jnp.full_like(m, -jnp.inf)");
	if (!(flags & ATTN_SKIP_INIT_L))
		ret = ret || kernel_line(t, "    ", "l[...] = jnp.zeros_like(l)");
	/* below_or_on_diag: the key block starts at or before the q block's last row */
	if (s->causal)
		ret = ret ||
		      kernel_line(t, "", "@pl.when(pl.program_id(2) * %lld <= pl.program_id(1) * %lld + %lld)",
			   (long long)s->bk, (long long)s->bq, (long long)(s->bq - 1)) ||
		      kernel_line(t, "", "def _():");
	ret = ret || step_lines(t, in, s) ||
	      kernel_line(t, "", "@pl.when(pl.program_id(2) == pl.num_programs(2) - 1)") ||
	      kernel_line(t, "", "def _():") ||
	      kernel_line(t, "    ", "o[...] = (acc[...] / l[...]).astype(o.dtype)");
	(void)ret;	/* an overflow is remembered in t */
	return kernel_text_lower(k, gs, t, "attn_kernel");
}

struct tpurt_compiler_params attn_params(unsigned int flags)
{
	struct tpurt_compiler_params p = {
		.dimension_semantics = "parallel, parallel, arbitrary",
		.flags = flags,
	};

	return p;
}

/* One query row of one head: softmax of the scores over the keys it sees. */
static void attn_row(const float *q, const float *k, const float *v,
		     const struct attn_shape *s, int64_t r, double *p,
		     double *out)
{
	int64_t n = s->causal ? r + 1 : s->seq, d = s->d;
	double scale = 1 / sqrt((double)d), m = -INFINITY, sum = 0;

	for (int64_t j = 0; j < n; j++) {
		double dot = 0;

		for (int64_t c = 0; c < d; c++)
			dot += (double)q[r * d + c] * k[j * d + c];
		p[j] = dot * scale;
		m = fmax(m, p[j]);
	}
	for (int64_t j = 0; j < n; j++) {
		p[j] = exp(p[j] - m);
		sum += p[j];
	}
	for (int64_t c = 0; c < d; c++)
		out[r * d + c] = 0;
	for (int64_t j = 0; j < n; j++)
		for (int64_t c = 0; c < d; c++)
			out[r * d + c] += p[j] / sum * v[j * d + c];
}

void attn_reference(const float *q, const float *k, const float *v,
		    const struct attn_shape *s, int64_t row_step, double *out)
{
	double *p = malloc(s->seq * sizeof(double));
	int64_t head = s->seq * s->d;

	for (int64_t b = 0; p && b < s->bh; b++)
		for (int64_t r = 0; r < s->seq; r += row_step)
			attn_row(q + b * head, k + b * head, v + b * head, s,
				 r, p, out + b * head);
	free(p);
}

double attn_flops(const struct attn_shape *s)
{
	double pairs = s->causal ? s->seq * (s->seq + 1.0) / 2 :
				   (double)s->seq * s->seq;

	return 4.0 * s->bh * s->d * pairs;
}

void round_to_bf16(float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = tpurt_bf16_to_f32(tpurt_f32_to_bf16(v[i]));
}

float *random_values(size_t n, float scale, enum tpurt_dtype dtype,
		     uint32_t seed)
{
	float *v = malloc(n * sizeof(float));

	if (!v)
		return NULL;
	sample_fill(v, TPURT_F32, n, seed);
	for (size_t i = 0; i < n; i++)
		v[i] *= scale;
	if (dtype == TPURT_BF16)
		round_to_bf16(v, n);
	return v;
}
