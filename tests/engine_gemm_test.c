// SPDX-License-Identifier: MIT
/*
 * Host test: the engine's GEMM kernels against naive loops, for every dtype,
 * transpose combination, accumulate mode and awkward shape, plus two
 * threads calling at once (the engine's core workers do).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_gemm.h"
#include "kselftest_harness.h"

enum dtype { F32, BF16, U8, S8 };

/* One GEMM problem: operands stored with padded leading dims. */
struct prob {
	enum dtype ta, tb;	/* U8/S8 for the 8-bit case */
	bool trans_a, trans_b, accumulate;
	int64_t m, n, k, lda, ldb, ldc;
	void *a, *b;
	void *c;		/* float or int32_t, m x ldc, preset */
	void *c0;		/* the preset, for the reference */
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static float rand_float(void)
{
	return (float)(next_rand() % 2001) / 1000.0f - 1.0f;
}

static size_t elem_size(enum dtype t)
{
	return t == F32 ? 4 : t == BF16 ? 2 : 1;
}

static double elem(enum dtype t, const void *p, int64_t idx)
{
	uint32_t bits;
	float f;

	switch (t) {
	case F32:
		return ((const float *)p)[idx];
	case BF16:
		bits = (uint32_t)((const uint16_t *)p)[idx] << 16;
		memcpy(&f, &bits, sizeof(f));
		return f;
	case U8:
		return ((const uint8_t *)p)[idx];
	default:
		return ((const int8_t *)p)[idx];
	}
}

static void fill(enum dtype t, void *p, int64_t count)
{
	for (int64_t i = 0; i < count; i++) {
		float f = rand_float();
		uint32_t bits;

		switch (t) {
		case F32:
			((float *)p)[i] = f;
			break;
		case BF16:
			memcpy(&bits, &f, sizeof(bits));
			((uint16_t *)p)[i] = bits >> 16;	/* exact bf16 */
			break;
		default:
			((uint8_t *)p)[i] = next_rand();
		}
	}
}

static int64_t a_idx(const struct prob *p, int64_t i, int64_t q)
{
	return p->trans_a ? q * p->lda + i : i * p->lda + q;
}

static int64_t b_idx(const struct prob *p, int64_t q, int64_t j)
{
	return p->trans_b ? j * p->ldb + q : q * p->ldb + j;
}

static void prob_init(struct prob *p, enum dtype ta, enum dtype tb, bool trans_a,
		      bool trans_b, bool accumulate, int64_t m, int64_t n,
		      int64_t k)
{
	int64_t a_rows = trans_a ? k : m, b_rows = trans_b ? n : k;

	*p = (struct prob){ ta, tb, trans_a, trans_b, accumulate, m, n, k };
	p->lda = (trans_a ? m : k) + 3;
	p->ldb = (trans_b ? k : n) + 5;
	p->ldc = n + 2;
	p->a = calloc(a_rows * p->lda + 1, elem_size(ta));
	p->b = calloc(b_rows * p->ldb + 1, elem_size(tb));
	p->c = calloc(m * p->ldc + 1, 4);
	p->c0 = calloc(m * p->ldc + 1, 4);
	fill(ta, p->a, a_rows * p->lda);
	fill(tb, p->b, b_rows * p->ldb);
	if (ta == F32 || ta == BF16)
		fill(F32, p->c, m * p->ldc);
	else
		for (int64_t i = 0; i < m * p->ldc; i++)
			((int32_t *)p->c)[i] = (int32_t)(next_rand() * 65537u);
	memcpy(p->c0, p->c, m * p->ldc * 4);
}

static void prob_free(struct prob *p)
{
	free(p->a);
	free(p->b);
	free(p->c);
	free(p->c0);
}

static void prob_run(struct prob *p)
{
	switch (p->ta) {
	case F32:
		tpu_gemm_f32(p->trans_a, p->trans_b, p->m, p->n, p->k, p->a, p->lda,
			     p->b, p->ldb, p->c, p->ldc, p->accumulate);
		break;
	case BF16:
		tpu_gemm_bf16(p->trans_a, p->trans_b, p->m, p->n, p->k, p->a,
			      p->lda, p->b, p->ldb, p->c, p->ldc, p->accumulate);
		break;
	default:
		tpu_gemm_i8(p->ta == U8, p->tb == U8, p->trans_a, p->trans_b,
			    p->m, p->n, p->k, p->a, p->lda, p->b, p->ldb, p->c,
			    p->ldc, p->accumulate);
	}
}

/*
 * An operand as doubles, one row of k per row of C (A) or column of C (B):
 * the references below then read both contiguously.
 */
static double *unpack(const struct prob *p, bool is_b)
{
	int64_t rows = is_b ? p->n : p->m;
	double *d = malloc((rows * p->k + 1) * sizeof(*d));

	for (int64_t r = 0; r < rows; r++)
		for (int64_t q = 0; q < p->k; q++)
			d[r * p->k + q] = is_b ? elem(p->tb, p->b, b_idx(p, q, r)) :
						 elem(p->ta, p->a, a_idx(p, r, q));
	return d;
}

/* Exact int32 wrap-around, as the MXU's accumulators do. */
static int32_t ref_int(const struct prob *p, const double *a, const double *b,
		       int64_t i, int64_t j)
{
	uint32_t s = p->accumulate ? (uint32_t)((int32_t *)p->c0)[i * p->ldc + j] : 0;

	for (int64_t q = 0; q < p->k; q++)
		s += (uint32_t)(int32_t)(a[i * p->k + q] * b[j * p->k + q]);
	return (int32_t)s;
}

/* Float results may differ by summation order: bound by the sum of |terms|. */
static bool float_ok(const struct prob *p, const double *a, const double *b,
		     int64_t i, int64_t j)
{
	double c0 = p->accumulate ? ((float *)p->c0)[i * p->ldc + j] : 0.0;
	double s = c0, mag = fabs(c0);
	float got = ((float *)p->c)[i * p->ldc + j];

	for (int64_t q = 0; q < p->k; q++) {
		double t = a[i * p->k + q] * b[j * p->k + q];

		s += t;
		mag += fabs(t);
	}
	return fabs(got - s) <= 1e-6 * mag + 1e-30;
}

/* Number of wrong elements; logs the first, and checks the C padding. */
static int64_t prob_check(struct __test_metadata *_metadata, const struct prob *p)
{
	double *a = unpack(p, false), *b = unpack(p, true);
	int64_t bad = 0;

	for (int64_t i = 0; i < p->m; i++) {
		for (int64_t j = 0; j < p->ldc; j++) {
			int64_t at = i * p->ldc + j;
			bool ok;

			if (j >= p->n)	/* padding must be untouched */
				ok = !memcmp((char *)p->c + at * 4, (char *)p->c0 + at * 4, 4);
			else if (p->ta == F32 || p->ta == BF16)
				ok = float_ok(p, a, b, i, j);
			else
				ok = ((int32_t *)p->c)[at] == ref_int(p, a, b, i, j);
			if (!ok && !bad++)
				TH_LOG("dtype %d/%d t%d%d acc %d %ldx%ldx%ld: wrong at (%ld,%ld)",
				       p->ta, p->tb, p->trans_a, p->trans_b,
				       p->accumulate, (long)p->m, (long)p->n,
				       (long)p->k, (long)i, (long)j);
		}
	}
	free(a);
	free(b);
	return bad;
}

static const int64_t shapes[][3] = {
	{ 1, 1, 1 }, { 7, 5, 3 }, { 1, 129, 7 }, { 129, 1, 255 },
	{ 6, 16, 2 }, { 33, 47, 129 }, { 64, 255, 17 }, { 13, 37, 1100 },
	{ 200, 21, 30 }, { 3, 2100, 5 }, { 97, 33, 513 },
	{ 24, 32, 64 },		/* whole 12-row tiles of the zmm kernel */
	{ 128, 128, 128 },	/* a Pallas block: the small-block kernels */
	{ 131, 200, 96 },	/* partial tiles of both small kernels */
	{ 8, 48, 40 },		/* two 4-row tiles, no 6-row one */
	{ 10, 17, 9 },		/* a 6-row and a 4-row tile */
	{ 14, 32, 531 },	/* int8: two k blocks, k past the 16-wide packing */
	{ 61, 50, 47 },		/* int8: every edge of both packed panels */
	{ 9, 300, 520 },	/* int8: two B blocks and two k blocks */
	{ 800, 20, 40 },	/* int8: two A blocks */
	{ 16, 64, 33 },		/* int8: a 4-row tile in place, four B panels at once, odd k */
	{ 512, 80, 24 },	/* int8: a 2-row last tile (the engine's 512-row blocks) */
};

/* Every shape, transpose combination and accumulate mode for one dtype pair. */
static void sweep(struct __test_metadata *_metadata, enum dtype ta, enum dtype tb)
{
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int t = 0; t < 8; t++) {
			struct prob p;

			prob_init(&p, ta, tb, t & 1, t & 2, t & 4, shapes[s][0],
				  shapes[s][1], shapes[s][2]);
			prob_run(&p);
			EXPECT_EQ(0, prob_check(_metadata, &p));
			prob_free(&p);
		}
}

TEST(f32)
{
	tpu_gemm_init();
	sweep(_metadata, F32, F32);
}

TEST(bf16)
{
	tpu_gemm_init();
	sweep(_metadata, BF16, BF16);
}

/* Each instruction set the host has: AVX-512 and AVX2 kernels for small blocks. */
TEST(f32_bf16_every_isa)
{
	static const char *const isas[] = { "portable", "avx2", "avx512" };

	tpu_gemm_init();
	for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++) {
		if (tpu_gemm_use_isa(isas[i])) {
			TH_LOG("GEMM ISA %s: not on this host", isas[i]);
			continue;
		}
		sweep(_metadata, F32, F32);
		sweep(_metadata, BF16, BF16);
	}
	EXPECT_EQ(-1, tpu_gemm_use_isa("no-such-isa"));
	tpu_gemm_use_isa(NULL);
}

TEST(int8_all_signedness)
{
	tpu_gemm_init();
	TH_LOG("int8 kernel: %s", tpu_gemm_i8_kernel());
	sweep(_metadata, S8, S8);
	sweep(_metadata, U8, U8);
	sweep(_metadata, S8, U8);
	sweep(_metadata, U8, S8);
}

/* Each kernel the host can run, not only the one picked for it. */
TEST(int8_every_kernel)
{
	static const char *const names[] = { "portable", "avx2", "avxvnni-i16",
						   "avxvnni", "avx512vnni" };

	tpu_gemm_init();
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (tpu_gemm_i8_use(names[i])) {
			TH_LOG("int8 kernel %s: not on this host", names[i]);
			continue;
		}
		sweep(_metadata, S8, S8);
		sweep(_metadata, U8, U8);
		sweep(_metadata, S8, U8);
		sweep(_metadata, U8, S8);
	}
	EXPECT_EQ(-1, tpu_gemm_i8_use("no-such-kernel"));
	tpu_gemm_i8_use(NULL);
}

/* k = 0 multiplies nothing: overwrite zeroes C, accumulate leaves it. */
TEST(empty_k)
{
	struct prob p;

	tpu_gemm_init();
	for (int d = F32; d <= S8; d++)
		for (int acc = 0; acc < 2; acc++) {
			prob_init(&p, d, d, false, false, acc, 5, 9, 0);
			prob_run(&p);
			EXPECT_EQ(0, prob_check(_metadata, &p));
			prob_free(&p);
		}
}

/* Sums past INT32_MAX wrap: 255 * 255 * 40000 and -128 * -128 sums. */
static void wraps(struct __test_metadata *_metadata)
{
	struct prob p;

	prob_init(&p, U8, U8, false, true, false, 2, 17, 40000);
	memset(p.a, 0xff, 2 * p.lda);
	memset(p.b, 0xff, 17 * p.ldb);
	prob_run(&p);
	EXPECT_EQ(0, prob_check(_metadata, &p));
	EXPECT_EQ((int32_t)(uint32_t)(255u * 255u * 40000u), ((int32_t *)p.c)[0]);
	prob_free(&p);

	prob_init(&p, S8, S8, false, false, true, 3, 20, 700);
	memset(p.a, 0x80, 3 * p.lda);
	memset(p.b, 0x80, 700 * p.ldb);
	for (int64_t i = 0; i < 3 * p.ldc; i++)
		((int32_t *)p.c)[i] = ((int32_t *)p.c0)[i] = INT32_MAX - 5;
	prob_run(&p);
	EXPECT_EQ(0, prob_check(_metadata, &p));
	prob_free(&p);

	/* the one int16 overflow of a pair: (-128)(-128) + (-128)(-128) */
	prob_init(&p, S8, S8, false, false, false, 7, 33, 4099);
	memset(p.a, 0x80, 7 * p.lda);
	memset(p.b, 0x80, 4099 * p.ldb);
	prob_run(&p);
	EXPECT_EQ(0, prob_check(_metadata, &p));
	EXPECT_EQ(128 * 128 * 4099, ((int32_t *)p.c)[0]);
	prob_free(&p);

	/* uint8 255 against int8 -128 and 127, alternating along k */
	prob_init(&p, U8, S8, false, true, false, 5, 19, 3001);
	memset(p.a, 0xff, 5 * p.lda);
	for (int64_t i = 0; i < 19 * p.ldb; i++)
		((uint8_t *)p.b)[i] = i & 1 ? 0x7f : 0x80;
	prob_run(&p);
	EXPECT_EQ(0, prob_check(_metadata, &p));
	prob_free(&p);
}

/* On every int8 kernel the host can run, the AVX2 ones included. */
TEST(int32_wraps)
{
	static const char *const names[] = { "portable", "avx2", "avxvnni-i16",
						   "avxvnni", "avx512vnni" };

	tpu_gemm_init();
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (tpu_gemm_i8_use(names[i]))
			continue;
		TH_LOG("int8 kernel: %s", tpu_gemm_i8_kernel());
		wraps(_metadata);
	}
	tpu_gemm_i8_use(NULL);
}

/* Two threads on disjoint halves of one C, as two engine cores would. */
struct half {
	struct prob *p;
	int64_t row0, rows;
};

static void *run_half(void *arg)
{
	struct half *h = arg;
	struct prob q = *h->p;
	int64_t esz = elem_size(q.ta);

	q.m = h->rows;
	q.a = (char *)q.a + (q.trans_a ? h->row0 : h->row0 * q.lda) * esz;
	q.c = (char *)q.c + h->row0 * q.ldc * 4;
	for (int rep = 0; rep < 4; rep++)
		prob_run(&q);	/* overwrite: repeating gives the same C */
	return NULL;
}

TEST(two_threads)
{
	static const enum dtype types[][2] = { { F32, F32 }, { BF16, BF16 }, { S8, U8 } };

	tpu_gemm_init();
	for (size_t t = 0; t < 3; t++) {
		struct prob p;
		struct half h[2];
		pthread_t th[2];

		prob_init(&p, types[t][0], types[t][1], t == 1, t != 0, false,
			  300, 250, 600);
		h[0] = (struct half){ &p, 0, 150 };
		h[1] = (struct half){ &p, 150, 150 };
		for (int i = 0; i < 2; i++)
			ASSERT_EQ(0, pthread_create(&th[i], NULL, run_half, &h[i]));
		for (int i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		EXPECT_EQ(0, prob_check(_metadata, &p));
		prob_free(&p);
	}
}

TEST_HARNESS_MAIN
