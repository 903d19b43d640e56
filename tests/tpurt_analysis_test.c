// SPDX-License-Identifier: MIT
/*
 * Host test: the guide's performance helpers against its own numbers; the
 * runtime's estimate and block choice are the device's timing model
 * (rules/tpu_model_matmul.h) run on the device's parameters, whatever the
 * device is.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "tpu_model_matmul.h"
#include "tpurt.h"
#include "kselftest_harness.h"

/* The info of an in-process device of @cfg (NULL: a v5e). */
static void device_info(const struct tpurt_sim_config *cfg,
			struct tpurt_device_info *info)
{
	struct tpurt_device *dev;

	memset(info, 0, sizeof(*info));
	if (!tpurt_open_sim(cfg, &dev)) {
		tpurt_device_info(dev, info);
		tpurt_close(dev);
	}
}

static void v5e(struct tpurt_device_info *info)
{
	device_info(NULL, info);
}

TEST(the_guides_numbers)
{
	struct tpurt_device_info info;
	struct tpurt_matmul_analysis a;

	v5e(&info);
	EXPECT_EQ(2147483648ull, tpurt_matmul_flops(1024, 1024, 1024));
	EXPECT_EQ(12582912ull, tpurt_matmul_min_bytes(1024, 1024, 1024, TPURT_F32));
	/* ~170.7 flops/byte for f32, ~341 for bf16; the v5e ridge ~240.5 */
	EXPECT_LT(fabs(tpurt_matmul_intensity(1024, 1024, 1024, TPURT_F32) - 512.0 / 3), 1e-9);
	EXPECT_LT(fabs(tpurt_matmul_intensity(1024, 1024, 1024, TPURT_BF16) - 1024.0 / 3), 1e-9);
	EXPECT_LT(fabs(tpurt_device_ridge(&info, TPURT_BF16) - 197e12 / 819e9), 1e-9);
	EXPECT_EQ(394e12, tpurt_device_peak(&info, TPURT_INT8));
	/* (m*k*n/bn + k*n*m/bm + m*n) * itemsize, by hand for 4096^3 bf16 */
	EXPECT_EQ((4096ull * 4096 * 32 + 4096ull * 4096 * 32 + 4096ull * 4096) * 2,
		  tpurt_matmul_block_bytes(4096, 4096, 4096, 128, 128, 128, TPURT_BF16));
	EXPECT_EQ((4096ull * 4096 * 4 + 4096ull * 4096 * 8 + 4096ull * 4096) * 2,
		  tpurt_matmul_block_bytes(4096, 4096, 4096, 512, 1024, 1024, TPURT_BF16));

	/* 128-blocks: 2mkn / ((32 + 32 + 1) m n 2) = 4096 / 65 ~ 63: memory-bound */
	ASSERT_EQ(0, tpurt_matmul_analyze(&info, 4096, 4096, 4096, 128, 128, 128,
					  TPURT_BF16, &a));
	EXPECT_LT(fabs(a.block_intensity - 4096.0 / 65), 1e-9);
	EXPECT_EQ(0, a.compute_bound);
	/* (512, 1024, 1024): 4096 / 13 ~ 315 > 240.5: compute-bound */
	ASSERT_EQ(0, tpurt_matmul_analyze(&info, 4096, 4096, 4096, 512, 1024, 1024,
					  TPURT_BF16, &a));
	EXPECT_LT(fabs(a.block_intensity - 4096.0 / 13), 1e-9);
	EXPECT_EQ(1, a.compute_bound);
	EXPECT_EQ(2 * (512 * 1024 * 2 + 1024 * 1024 * 2 + 512 * 1024 * 2) + 512 * 1024 * 4,
		  a.vmem_bytes);
	/* the square crossover of the guide: m = k = n > ~1440 for f32 */
	ASSERT_EQ(0, tpurt_matmul_analyze(&info, 1400, 1400, 1400, 0, 0, 0, TPURT_F32, &a));
	EXPECT_EQ(0, a.compute_bound);
	ASSERT_EQ(0, tpurt_matmul_analyze(&info, 1480, 1480, 1480, 0, 0, 0, TPURT_F32, &a));
	EXPECT_EQ(1, a.compute_bound);
}

static int model(const struct tpu_config *cfg, uint64_t m, uint64_t k, uint64_t n,
		 uint64_t bm, uint64_t bk, uint64_t bn, enum tpu_dtype t,
		 struct tpu_matmul_result *r)
{
	struct tpu_matmul_desc d = { .m = m, .k = k, .n = n, .bm = bm, .bk = bk,
				     .bn = bn, .in_dtype = t,
				     .out_dtype = t == TPU_DTYPE_INT8 ? TPU_DTYPE_INT32 : t };

	return tpu_model_matmul(cfg, &d, r);
}

static const struct { uint64_t m, k, n, bm, bk, bn; int t; } cases[] = {
	{ 1024, 1024, 1024, 128, 128, 128, TPU_DTYPE_BF16 },
	{ 4096, 4096, 4096, 512, 1024, 1024, TPU_DTYPE_BF16 },
	{ 4096, 4096, 4096, 128, 128, 128, TPU_DTYPE_F32 },
	{ 2048, 1024, 512, 256, 512, 256, TPU_DTYPE_INT8 },
	{ 1000, 700, 300, 256, 256, 128, TPU_DTYPE_F32 },	/* edges */
	{ 1024, 128, 1024, 128, 128, 128, TPU_DTYPE_BF16 },	/* one k step */
};

/* The estimate and VMEM need are the model's, to the last bit. */
static void expect_the_model(struct __test_metadata *_metadata,
			     const struct tpurt_device_info *info,
			     const struct tpu_config *cfg)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tpurt_matmul_analysis a;
		struct tpu_matmul_result r;

		ASSERT_EQ(0, model(cfg, cases[i].m, cases[i].k, cases[i].n, cases[i].bm,
				   cases[i].bk, cases[i].bn, cases[i].t, &r));
		ASSERT_EQ(0, tpurt_matmul_analyze(info, cases[i].m, cases[i].k, cases[i].n,
						  cases[i].bm, cases[i].bk, cases[i].bn,
						  (enum tpurt_dtype)cases[i].t, &a));
		EXPECT_EQ(0, memcmp(&a.est_time_s, &r.stats.time_s, sizeof(double)))
			TH_LOG("case %zu: runtime %.17g s, device model %.17g s", i,
			       a.est_time_s, r.stats.time_s);
		EXPECT_EQ(r.vmem_bytes, a.vmem_bytes) TH_LOG("case %zu", i);
	}
}

TEST(estimate_is_the_device_model)
{
	struct tpurt_device_info info;
	struct tpu_config cfg;

	v5e(&info);
	tpu_config_defaults(&cfg);
	expect_the_model(_metadata, &info, &cfg);
}

/* Another chip: the runtime follows the device's parameters, not a v5e's. */
TEST(estimate_follows_the_devices_parameters)
{
	struct tpurt_sim_config sc = {
		.cores = 2, .mxu_dim = 256, .hbm_bandwidth = 1600000000000ull,
		.peak_flops_bf16 = 459000000000000ull, .step_cost_ns = 100,
		.launch_cost_ns = 5000,
	};
	struct tpurt_device_info info, v5e_info;
	struct tpurt_matmul_analysis a, b;
	struct tpu_config cfg;

	device_info(&sc, &info);
	ASSERT_EQ(2, info.cores);
	tpu_config_defaults(&cfg);
	cfg.cores = sc.cores;
	cfg.mxu_dim = sc.mxu_dim;
	cfg.hbm_bandwidth = sc.hbm_bandwidth;
	cfg.peak_flops_bf16 = sc.peak_flops_bf16;
	cfg.step_cost_ns = sc.step_cost_ns;
	cfg.launch_cost_ns = sc.launch_cost_ns;
	expect_the_model(_metadata, &info, &cfg);
	/* and differs from the v5e's */
	v5e(&v5e_info);
	ASSERT_EQ(0, tpurt_matmul_analyze(&info, 4096, 4096, 4096, 512, 1024, 1024,
					  TPURT_BF16, &a));
	ASSERT_EQ(0, tpurt_matmul_analyze(&v5e_info, 4096, 4096, 4096, 512, 1024, 1024,
					  TPURT_BF16, &b));
	EXPECT_LT(a.est_time_s, b.est_time_s);
}

TEST(chosen_blocks_are_the_models_best)
{
	static const uint64_t sizes[] = { 1024, 2048, 4096 };
	struct tpurt_device_info info;
	struct tpu_config cfg;

	v5e(&info);
	tpu_config_defaults(&cfg);
	for (size_t i = 0; i < 3; i++) {
		uint64_t s = sizes[i];
		struct tpu_matmul_desc d = { .m = s, .k = s, .n = s,
					     .in_dtype = TPU_DTYPE_BF16,
					     .out_dtype = TPU_DTYPE_BF16 };
		struct tpu_matmul_result best;
		int64_t b[3];

		ASSERT_EQ(0, tpu_model_matmul_best(&cfg, &d, cfg.vmem_limit, &best));
		ASSERT_EQ(0, tpurt_matmul_choose_blocks(&info, s, s, s, TPURT_BF16, 0, b));
		EXPECT_EQ(d.bm, b[0]) TH_LOG("%llu", (unsigned long long)s);
		EXPECT_EQ(d.bk, b[1]) TH_LOG("%llu", (unsigned long long)s);
		EXPECT_EQ(d.bn, b[2]) TH_LOG("%llu", (unsigned long long)s);
		/* the best fits the limit, and is MXU-sized */
		EXPECT_LE(best.vmem_bytes, cfg.vmem_limit);
		EXPECT_EQ(0, b[0] % 128);
		EXPECT_EQ(0, b[2] % 128);
	}
	{
		int64_t b[3];
		struct tpu_matmul_desc d = { .m = 4096, .k = 4096, .n = 4096,
					     .in_dtype = TPU_DTYPE_INT8,
					     .out_dtype = TPU_DTYPE_INT32 };
		struct tpu_matmul_result best;

		/* 8-bit inputs: int32 accumulator and output, as tpurt_matmul */
		ASSERT_EQ(0, tpu_model_matmul_best(&cfg, &d, 4 << 20, &best));
		ASSERT_EQ(0, tpurt_matmul_choose_blocks(&info, 4096, 4096, 4096,
							TPURT_INT8, 4 << 20, b));
		EXPECT_EQ(d.bm, b[0]);
		EXPECT_EQ(d.bk, b[1]);
		EXPECT_EQ(d.bn, b[2]);
		EXPECT_EQ(-ENOSPC, tpurt_matmul_choose_blocks(&info, 4096, 4096, 4096,
							       TPURT_F32, 1000, b));
		EXPECT_NE(NULL, strstr(tpurt_last_error(), "fit in 1000 bytes of VMEM"));
		EXPECT_EQ(-EINVAL, tpurt_matmul_choose_blocks(&info, 4096, 4096, 4096,
							       TPURT_INT32, 0, b));
		EXPECT_NE(NULL, strstr(tpurt_last_error(), "no routine for int32"))
			TH_LOG("%s", tpurt_last_error());
	}
}

TEST_HARNESS_MAIN
