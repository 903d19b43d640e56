// SPDX-License-Identifier: MIT
/*
 * Host test: packed GEMM operands kept for a job (tpu_panels.h). A grid of
 * small blocks revisits its input blocks; kept packings must give the bits
 * that packing at every call gives (random floats: any change of summation
 * order would show), for every GEMM instruction set, transposed operands,
 * both cores and a left-hand side bigger than a core's cache; and they must
 * not be used where the job can change an input: an output aliasing it
 * (each visit must read what the last write-back left), debug mode.
 */
#include <stdlib.h>
#include <string.h>

#include "job_builder.h"
#include "tpu_gemm.h"
#include "tpu_panels.h"
#include "kselftest_harness.h"

struct outcome {
	void *z;
	uint64_t reused;	/* GEMM operands read from a kept packing */
	int ret;
};

/* @j on a fresh device, random inputs; packings kept or not (@keep). */
static struct outcome run_job(struct mm_job *j, unsigned int cores, bool keep)
{
	unsigned int es_in = tpu_dtype_size(j->in_dtype);
	size_t zbytes = j->m * j->n * tpu_dtype_size(j->out_dtype);
	struct tdev *d = tdev_new(64 << 20, cores);
	struct tpu_job_result res;
	struct outcome o = { malloc(zbytes) };
	uint64_t before;
	size_t len;
	void *blob;

	j->x_slot = tdev_alloc(d, j->m * j->k * es_in);
	j->y_slot = tdev_alloc(d, j->k * j->n * es_in);
	j->z_slot = j->alias == 1 ? j->x_slot : j->alias == 2 ? j->y_slot :
		    tdev_alloc(d, zbytes);
	ref_fill(tdev_ptr(d, j->x_slot), j->in_dtype, j->m * j->k, 3, 1, 0);
	ref_fill(tdev_ptr(d, j->y_slot), j->in_dtype, j->k * j->n, 4, 1, 0);
	blob = mm_build(j, &len);
	tpu_panels_use(keep);
	before = tpu_panels_reused();
	o.ret = tdev_run(d, blob, len, 0, &res);
	o.reused = tpu_panels_reused() - before;
	tpu_panels_use(true);
	memcpy(o.z, tdev_ptr(d, j->z_slot), zbytes);
	free(blob);
	tdev_free(d);
	return o;
}

/* Kept or not, the same bits; returns how many operands were reused. */
static uint64_t check_same(struct __test_metadata *_metadata, struct mm_job *j,
			   unsigned int cores)
{
	size_t zbytes = j->m * j->n * tpu_dtype_size(j->out_dtype);
	struct outcome off = run_job(j, cores, false);
	struct outcome on = run_job(j, cores, true);
	uint64_t reused = on.reused;

	EXPECT_EQ(0, off.ret);
	EXPECT_EQ(0, on.ret);
	EXPECT_EQ(0, off.reused);
	EXPECT_EQ(0, memcmp(off.z, on.z, zbytes))
		TH_LOG("m=%llu k=%llu n=%llu b=%u,%u,%u dtype %u alias %u cores %u: kept packings changed the result",
		       (unsigned long long)j->m, (unsigned long long)j->k,
		       (unsigned long long)j->n, j->bm, j->bk, j->bn,
		       j->in_dtype, j->alias, cores);
	free(off.z);
	free(on.z);
	return reused;
}

/* Only our small-block kernels pack (not under TPU_GEMM_ISA=portable). */
static bool packs(void)
{
	tpu_gemm_init();
	return strcmp(tpu_gemm_isa_name(), "portable");
}

static struct mm_job job(uint64_t m, uint64_t k, uint64_t n, uint32_t b,
			 unsigned int in)
{
	return (struct mm_job){ .m = m, .k = k, .n = n, .bm = b, .bk = b,
				.bn = b, .in_dtype = in,
				.out_dtype = TPU_DTYPE_F32, .acc_scratch = true };
}

/* Grid (4, 4, 4): each x block comes back at every j, each y at every i. */
TEST(revisited_blocks_reuse_their_packing_with_the_same_bits)
{
	static const unsigned int dtypes[] = { TPU_DTYPE_F32, TPU_DTYPE_BF16 };

	for (size_t t = 0; t < 2; t++)
		for (unsigned int cores = 1; cores <= 2; cores++) {
			struct mm_job j = job(512, 512, 512, 128, dtypes[t]);

			uint64_t reused = check_same(_metadata, &j, cores);

			/*
			 * 64 steps, two operands each, 32 first visits; two
			 * cores may both pack one of y's blocks at once
			 */
			EXPECT_GE(64 * 2 - 32, reused);
			EXPECT_LE(packs() ? 64 * 2 - 32 - 16 : 0, reused);
			j.transpose_rhs = true;
			EXPECT_EQ(packs(), check_same(_metadata, &j, cores) > 0);
			j.transpose_lhs = true;
			j.transpose_rhs = false;
			EXPECT_EQ(packs(), check_same(_metadata, &j, cores) > 0);
		}
}

/* Kept or not, every instruction set gives its own bits. */
TEST(every_gemm_isa_gives_the_same_bits)
{
	static const char *const isas[] = { "portable", "avx2", "avx512" };

	tpu_gemm_init();
	for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++) {
		struct mm_job f = job(384, 256, 384, 128, TPU_DTYPE_F32);
		struct mm_job b = job(384, 256, 384, 128, TPU_DTYPE_BF16);
		struct mm_job odd = job(300, 200, 260, 100, TPU_DTYPE_F32);

		if (tpu_gemm_use_isa(isas[i])) {
			TH_LOG("GEMM ISA %s: not on this host", isas[i]);
			continue;
		}
		check_same(_metadata, &f, 2);
		check_same(_metadata, &b, 2);
		check_same(_metadata, &odd, 2);	/* partial tiles */
	}
	tpu_gemm_use_isa(NULL);
}

/* x's row of blocks (128 x 20480 f32, 10 MiB) overflows a core's cache. */
TEST(a_full_core_cache_empties_and_keeps_the_bits)
{
	struct mm_job j = job(256, 20480, 256, 128, TPU_DTYPE_F32);

	EXPECT_EQ(packs(), check_same(_metadata, &j, 1) > 0);
}

/*
 * z aliases x (or y): each write-back changes blocks later steps read, so
 * nothing of that input may be kept; the other input still is (48 of its
 * 64 visits are revisits). With y aliased the cores would race (one
 * writes the rows of y the other reads), so one core.
 */
TEST(an_input_an_output_aliases_is_not_kept)
{
	for (unsigned int alias = 1; alias <= 2; alias++) {
		struct mm_job j = job(512, 512, 512, 128, TPU_DTYPE_F32);
		uint64_t reused;

		j.alias = alias;
		reused = check_same(_metadata, &j, alias == 1 ? 2 : 1);
		EXPECT_GE(48, reused);
		EXPECT_LE(packs() ? 48 - 16 : 0, reused);	/* two cores at once */
	}
}

/* Debug mode copies every block into VMEM: nothing is read in place. */
TEST(debug_mode_keeps_nothing)
{
	struct mm_job j = job(512, 512, 512, 128, TPU_DTYPE_F32);

	j.flags = TPU_JOB_F_DEBUG;
	EXPECT_EQ(0, check_same(_metadata, &j, 2));
}

TEST_HARNESS_MAIN
