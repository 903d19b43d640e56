// SPDX-License-Identifier: MIT
/*
 * Host test: the guide's matmul kernels on the engine against a naive
 * reference, for f32, bf16 and int8, many shapes (edge blocks included),
 * transposed contractions, fused activation and bias, and core counts.
 * Inputs are small integers where results are compared bit for bit, so the
 * check does not depend on the GEMM's summation order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpu_gemm.h"
#include "kselftest_harness.h"

struct shape {
	uint64_t m, k, n;
	uint32_t bm, bk, bn;
};

static const struct shape shapes[] = {
	{ 256, 256, 256, 128, 128, 128 },
	{ 128, 384, 256, 128, 128, 128 },
	{ 100, 70, 90, 32, 16, 64 },		/* edge blocks on every dim */
	{ 130, 300, 129, 64, 128, 32 },
	{ 64, 64, 64, 128, 128, 128 },		/* one block bigger than the array */
	{ 33, 17, 65, 8, 8, 8 },
	{ 1, 1, 1, 1, 1, 1 },
	{ 7, 200, 3, 4, 64, 2 },
};

/* Run @j on a fresh device with @cores; fills @z with the engine's result. */
static int run_mm(struct mm_job *j, unsigned int cores, uint32_t seed,
		  int lo, int hi, void *want, void *got,
		  struct tpu_job_result *res)
{
	unsigned int es_in = tpu_dtype_size(j->in_dtype);
	unsigned int es_out = tpu_dtype_size(j->out_dtype);
	struct tdev *d = tdev_new(8 << 20, cores);
	float *bias;
	size_t len;
	void *blob;
	int ret;

	j->x_slot = tdev_alloc(d, j->m * j->k * es_in);
	j->y_slot = tdev_alloc(d, j->k * j->n * es_in);
	j->z_slot = tdev_alloc(d, j->m * j->n * es_out);
	j->bias_slot = tdev_alloc(d, j->n * 4);
	ref_fill(tdev_ptr(d, j->x_slot), j->in_dtype, j->m * j->k, seed, lo, hi);
	ref_fill(tdev_ptr(d, j->y_slot), j->in_dtype, j->k * j->n, seed + 1, lo, hi);
	bias = tdev_ptr(d, j->bias_slot);
	ref_fill(bias, TPU_DTYPE_F32, j->n, seed + 2, -3, 3);
	if (want)
		ref_matmul(j, tdev_ptr(d, j->x_slot), tdev_ptr(d, j->y_slot),
			   bias, want);
	blob = mm_build(j, &len);
	ret = tdev_run(d, blob, len, 0, res);
	memcpy(got, tdev_ptr(d, j->z_slot), j->m * j->n * es_out);
	free(blob);
	tdev_free(d);
	return ret;
}

static void check_mm(struct __test_metadata *_metadata, struct mm_job *j,
		     unsigned int cores)
{
	size_t bytes = j->m * j->n * tpu_dtype_size(j->out_dtype);
	void *want = malloc(bytes), *got = malloc(bytes);
	struct tpu_job_result res;
	uint64_t bad = 0, first = 0;

	ASSERT_EQ(0, run_mm(j, cores, 7, -3, 3, want, got, &res))
		TH_LOG("%s", res.message);
	for (uint64_t i = 0; i < j->m * j->n; i++)
		if (ref_get(want, j->out_dtype, i) != ref_get(got, j->out_dtype, i) &&
		    !bad++)
			first = i;
	EXPECT_EQ(0, bad)
		TH_LOG("m=%llu k=%llu n=%llu b=%u,%u,%u dtype %u: %llu wrong, first at %llu: %g != %g",
		       (unsigned long long)j->m, (unsigned long long)j->k,
		       (unsigned long long)j->n, j->bm, j->bk, j->bn, j->in_dtype,
		       (unsigned long long)bad, (unsigned long long)first,
		       ref_get(got, j->out_dtype, first),
		       ref_get(want, j->out_dtype, first));
	free(want);
	free(got);
}

static struct mm_job mm_of(const struct shape *s, unsigned int in,
			   unsigned int out, bool scratch)
{
	return (struct mm_job){ .m = s->m, .k = s->k, .n = s->n, .bm = s->bm,
				.bk = s->bk, .bn = s->bn, .in_dtype = in,
				.out_dtype = out, .acc_scratch = scratch };
}

#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

TEST(f32_first_kernel_accumulates_in_output)
{
	for (size_t s = 0; s < NSHAPES; s++) {
		struct mm_job j = mm_of(&shapes[s], TPU_DTYPE_F32, TPU_DTYPE_F32, false);

		check_mm(_metadata, &j, 1);
	}
}

TEST(bf16_with_f32_scratch_and_bf16_store)
{
	for (size_t s = 0; s < NSHAPES; s++) {
		struct mm_job j = mm_of(&shapes[s], TPU_DTYPE_BF16, TPU_DTYPE_BF16, true);

		check_mm(_metadata, &j, 2);
	}
}

TEST(int8_into_int32)
{
	for (size_t s = 0; s < NSHAPES; s++) {
		struct mm_job j = mm_of(&shapes[s], TPU_DTYPE_INT8, TPU_DTYPE_INT32, true);

		check_mm(_metadata, &j, 1);
	}
}

TEST(uint8_and_int8_store_saturates)
{
	/* sums of products of up to 3*3*k overflow int8: saturation shows */
	for (size_t s = 0; s < NSHAPES; s++) {
		struct mm_job j = mm_of(&shapes[s], TPU_DTYPE_UINT8, TPU_DTYPE_INT8, true);

		check_mm(_metadata, &j, 1);
	}
}

TEST(transposed_rhs_and_lhs)
{
	for (size_t s = 0; s < NSHAPES; s++) {
		struct mm_job j = mm_of(&shapes[s], TPU_DTYPE_BF16, TPU_DTYPE_F32, true);

		j.transpose_rhs = true;
		check_mm(_metadata, &j, 1);
		j.transpose_rhs = false;
		j.transpose_lhs = true;		/* x.T @ dz, the backward pass */
		check_mm(_metadata, &j, 2);
		j.transpose_rhs = true;
		check_mm(_metadata, &j, 1);
	}
}

TEST(fused_activation_and_bias)
{
	static const int acts[] = { TPU_UNARY_RELU, TPU_UNARY_GELU, TPU_UNARY_SILU,
				    TPU_UNARY_TANH };

	for (size_t a = 0; a < sizeof(acts) / sizeof(acts[0]); a++) {
		struct mm_job j = mm_of(&shapes[2], TPU_DTYPE_F32, TPU_DTYPE_BF16, true);

		j.activation = acts[a];
		check_mm(_metadata, &j, 1);
		j.bias = true;
		j.out_dtype = TPU_DTYPE_F32;
		check_mm(_metadata, &j, 2);
	}
}

TEST(core_counts_give_identical_bits)
{
	/* random floats: rounding differs with any change of order */
	static const struct shape s = { 200, 300, 190, 64, 128, 64 };
	struct mm_job j = mm_of(&s, TPU_DTYPE_F32, TPU_DTYPE_F32, true);
	size_t bytes = j.m * j.n * 4;
	void *one = malloc(bytes), *got = malloc(bytes);
	struct tpu_job_result res;

	j.activation = TPU_UNARY_GELU;
	ASSERT_EQ(0, run_mm(&j, 1, 3, 1, 0, NULL, one, &res));
	for (unsigned int cores = 2; cores <= 4; cores++) {
		ASSERT_EQ(0, run_mm(&j, cores, 3, 1, 0, NULL, got, &res));
		EXPECT_EQ(cores < 4 ? cores : 4, res.stats.cores_used);
		EXPECT_EQ(0, memcmp(one, got, bytes)) TH_LOG("cores=%u", cores);
	}
	free(one);
	free(got);
}

TEST(random_floats_close_to_double_reference)
{
	static const struct shape s = { 96, 257, 80, 32, 64, 32 };
	struct mm_job j = mm_of(&s, TPU_DTYPE_F32, TPU_DTYPE_F32, false);
	float *want = malloc(j.m * j.n * 4), *got = malloc(j.m * j.n * 4);
	struct tpu_job_result res;

	ASSERT_EQ(0, run_mm(&j, 2, 11, 1, 0, want, got, &res));
	float worst = 0;

	for (uint64_t i = 0; i < j.m * j.n; i++)
		worst = fmaxf(worst, fabsf(want[i] - got[i]));
	EXPECT_TRUE(worst < 1e-4f) TH_LOG("max error %g", worst);
	free(want);
	free(got);
}

/*
 * Every GEMM instruction set the host has (TPU_GEMM_ISA's choices): the
 * small-block kernels and the int8 ones give the reference's bits on whole
 * jobs, transposed operands and partial tiles included.
 */
TEST(every_gemm_isa_gives_the_reference)
{
	static const char *const isas[] = { "portable", "avx2", "avx512" };
	static const struct shape small[] = {
		{ 256, 256, 256, 128, 128, 128 },
		{ 200, 300, 190, 100, 150, 70 },	/* partial tiles */
	};

	tpu_gemm_init();
	for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++) {
		if (tpu_gemm_use_isa(isas[i])) {
			TH_LOG("GEMM ISA %s: not on this host", isas[i]);
			continue;
		}
		for (size_t s = 0; s < sizeof(small) / sizeof(small[0]); s++) {
			struct mm_job f = mm_of(&small[s], TPU_DTYPE_F32, TPU_DTYPE_F32, true);
			struct mm_job b = mm_of(&small[s], TPU_DTYPE_BF16, TPU_DTYPE_F32, true);
			struct mm_job q = mm_of(&small[s], TPU_DTYPE_INT8, TPU_DTYPE_INT32, true);

			check_mm(_metadata, &f, 2);
			f.transpose_lhs = f.transpose_rhs = true;
			check_mm(_metadata, &f, 1);
			check_mm(_metadata, &b, 2);
			b.transpose_rhs = true;
			check_mm(_metadata, &b, 1);
			check_mm(_metadata, &q, 2);
		}
	}
	tpu_gemm_use_isa(NULL);
}

TEST(model_only_8192_cubed_is_instant)
{
	struct tdev *d = tdev_new(1 << 20, 2);
	struct mm_job j = { .m = 8192, .k = 8192, .n = 8192, .bm = 128, .bk = 128,
			    .bn = 128, .in_dtype = TPU_DTYPE_BF16,
			    .out_dtype = TPU_DTYPE_BF16, .acc_scratch = true };
	uint64_t size = 8192ull * 8192 * 2;
	/* disjoint: an output sharing bytes with an input must be an alias */
	struct tpu_buffer_slot slots[3] = { { 0, size }, { size, size },
					    { 2 * size, size } };
	struct tpu_job_result res;
	size_t len;
	void *blob;

	j.x_slot = 0, j.y_slot = 1, j.z_slot = 2;
	blob = mm_build(&j, &len);
	ASSERT_EQ(0, tpu_engine_run(d->engine, blob, len, NULL, 1ull << 40,
				    slots, 3, TPU_RUN_MODEL_ONLY, &res))
		TH_LOG("%s", res.message);
	EXPECT_EQ(262144, res.stats.steps);
	EXPECT_EQ(2ull * 8192 * 8192 * 8192, res.stats.mxu_flops);
	EXPECT_EQ(res.stats.mxu_flops, res.stats.model.flops);
	EXPECT_EQ(262144, res.stats.model.steps);
	EXPECT_EQ(64 * 64, res.stats.blocks_written);
	EXPECT_GT(res.stats.model.time_s, 2.0 * 8192 * 8192 * 8192 / 197e12);
	EXPECT_LT(res.stats.wall_ns, 2000000000ull);
	free(blob);
	tdev_free(d);
}

TEST_HARNESS_MAIN
