// SPDX-License-Identifier: MIT
/* Host test: the engine's device configuration, its checks and caps. */
#include <string.h>

#include "tpu_config.h"
#include "tpu_hw.h"
#include "kselftest_harness.h"

FIXTURE(config) {
	struct tpu_config cfg;
	char err[256];
};

FIXTURE_SETUP(config)
{
	tpu_config_defaults(&self->cfg);
	self->err[0] = '\0';
}

FIXTURE_TEARDOWN(config)
{
}

TEST_F(config, defaults_are_v5e)
{
	EXPECT_EQ(0, tpu_config_check(&self->cfg, self->err, sizeof(self->err)));
	EXPECT_EQ(1, self->cfg.cores);
	EXPECT_EQ(128, self->cfg.mxu_dim);
	EXPECT_EQ(4, self->cfg.mxu_count);
	EXPECT_EQ(128ull << 20, self->cfg.vmem_size);
	EXPECT_EQ(197000000000000ull, self->cfg.peak_flops_bf16);
	EXPECT_EQ(2 * self->cfg.peak_flops_bf16, self->cfg.peak_ops_int8);
	EXPECT_EQ(819000000000ull, self->cfg.hbm_bandwidth);
}

static int check(struct tpu_config *cfg, char *err, size_t len,
		 const char *field)
{
	int ret = tpu_config_check(cfg, err, len);

	return ret == -1 && strstr(err, field) != NULL;
}

TEST_F(config, hbm_size_must_be_power_of_two)
{
	self->cfg.hbm_size = 3ull << 30;
	EXPECT_TRUE(check(&self->cfg, self->err, sizeof(self->err), "hbm-size"))
		TH_LOG("%s", self->err);
	self->cfg.hbm_size = 512 << 10;
	EXPECT_TRUE(check(&self->cfg, self->err, sizeof(self->err), "hbm-size"));
	self->cfg.hbm_size = 0;
	EXPECT_TRUE(check(&self->cfg, self->err, sizeof(self->err), "hbm-size"));
	self->cfg.hbm_size = 16ull << 30;
	EXPECT_EQ(0, tpu_config_check(&self->cfg, self->err, sizeof(self->err)));
}

TEST_F(config, vmem_limit_within_vmem)
{
	self->cfg.vmem_limit = self->cfg.vmem_size + 1;
	EXPECT_TRUE(check(&self->cfg, self->err, sizeof(self->err), "vmem-limit"))
		TH_LOG("%s", self->err);
	self->cfg.vmem_limit = 0;
	EXPECT_TRUE(check(&self->cfg, self->err, sizeof(self->err), "vmem-limit"));
	self->cfg.vmem_limit = self->cfg.vmem_size;
	EXPECT_EQ(0, tpu_config_check(&self->cfg, self->err, sizeof(self->err)));
	self->cfg.vmem_size = 0;
	EXPECT_TRUE(check(&self->cfg, self->err, sizeof(self->err), "vmem-size"));
}

TEST_F(config, cores_in_range)
{
	self->cfg.cores = 0;
	EXPECT_TRUE(check(&self->cfg, self->err, sizeof(self->err), "cores"));
	self->cfg.cores = TPU_MAX_CORES + 1;
	EXPECT_TRUE(check(&self->cfg, self->err, sizeof(self->err), "cores"));
	self->cfg.cores = TPU_MAX_CORES;
	EXPECT_EQ(0, tpu_config_check(&self->cfg, self->err, sizeof(self->err)));
}

TEST_F(config, zero_rates_rejected)
{
	self->cfg.hbm_bandwidth = 0;
	EXPECT_TRUE(check(&self->cfg, self->err, sizeof(self->err),
			  "hbm-bandwidth"));
	tpu_config_defaults(&self->cfg);
	self->cfg.mxu_dim = 0;
	EXPECT_TRUE(check(&self->cfg, self->err, sizeof(self->err), "mxu-dim"));
	tpu_config_defaults(&self->cfg);
	self->cfg.smem_size = 0;
	EXPECT_TRUE(check(&self->cfg, self->err, sizeof(self->err), "smem-size"));
}

/* Each parameter just outside its range (uapi/tpu_params.h) is refused by name. */
TEST_F(config, ranges_from_the_table)
{
#define OUT_OF_RANGE(id, field, index, name, type, def, min, max, ...)	\
	if (min > 0) {							\
		tpu_config_defaults(&self->cfg);			\
		self->cfg.field = min - 1;				\
		EXPECT_TRUE(check(&self->cfg, self->err,		\
				  sizeof(self->err), name))		\
			TH_LOG("%s below %llu: %s", name,		\
			       (unsigned long long)min, self->err);	\
	}								\
	if (max != TPU_PARAM_NO_MAX) {					\
		tpu_config_defaults(&self->cfg);			\
		self->cfg.field = max + 1;				\
		EXPECT_TRUE(check(&self->cfg, self->err,		\
				  sizeof(self->err), name))		\
			TH_LOG("%s above %llu: %s", name,		\
			       (unsigned long long)max, self->err);	\
	}
	TPU_PARAMS(OUT_OF_RANGE)
#undef OUT_OF_RANGE
}

TEST_F(config, caps_report_each_field)
{
	struct tpu_config *c = &self->cfg;

	/* Distinct values, so a swapped pair of caps cannot pass. */
	c->hbm_size = 1; c->vmem_size = 2; c->vmem_limit = 3; c->smem_size = 4;
	c->cores = 5; c->mxu_dim = 6; c->mxu_count = 7;
	c->peak_flops_bf16 = 8; c->peak_flops_f32 = 9; c->peak_ops_int8 = 10;
	c->hbm_bandwidth = 11; c->step_cost_ns = 12;
	c->launch_cost_ns = (1ull << 40) + 13;

	EXPECT_EQ(1, tpu_config_cap(c, TPU_CAP_HBM_SIZE));
	EXPECT_EQ(2, tpu_config_cap(c, TPU_CAP_VMEM_SIZE));
	EXPECT_EQ(3, tpu_config_cap(c, TPU_CAP_VMEM_LIMIT));
	EXPECT_EQ(4, tpu_config_cap(c, TPU_CAP_SMEM_SIZE));
	EXPECT_EQ(5, tpu_config_cap(c, TPU_CAP_CORES));
	EXPECT_EQ(6, tpu_config_cap(c, TPU_CAP_MXU_DIM));
	EXPECT_EQ(7, tpu_config_cap(c, TPU_CAP_MXU_COUNT));
	EXPECT_EQ(8, tpu_config_cap(c, TPU_CAP_PEAK_FLOPS_BF16));
	EXPECT_EQ(9, tpu_config_cap(c, TPU_CAP_PEAK_FLOPS_F32));
	EXPECT_EQ(10, tpu_config_cap(c, TPU_CAP_PEAK_OPS_INT8));
	EXPECT_EQ(11, tpu_config_cap(c, TPU_CAP_HBM_BANDWIDTH));
	EXPECT_EQ(12, tpu_config_cap(c, TPU_CAP_STEP_COST_NS));
	EXPECT_EQ((1ull << 40) + 13, tpu_config_cap(c, TPU_CAP_LAUNCH_COST_NS));
	EXPECT_EQ(0, tpu_config_cap(c, TPU_CAP_COUNT));
	EXPECT_EQ(0, tpu_config_cap(c, 1000));
}

TEST_HARNESS_MAIN
