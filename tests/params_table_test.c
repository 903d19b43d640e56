// SPDX-License-Identifier: MIT
/*
 * Host test: the device parameters' table (uapi/tpu_params.h) and what
 * follows from it: the ABI numbers, the names check.sh and the selftest
 * share, and README's table, which tpurt-params prints.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu_drm.h"
#include "tpu_hw.h"
#include "tpu_params.h"
#include "kselftest_harness.h"

/* The numbers other drivers and devices use: they never change. */
TEST(abi_numbers)
{
	EXPECT_EQ(15, TPU_CAP_COUNT);
	EXPECT_EQ(14, TPU_CAP_EUP_ELEMS_PER_S);
	EXPECT_EQ(0, TPU_CAP_HBM_SIZE);
	EXPECT_EQ(4, TPU_CAP_CORES);
	EXPECT_EQ(12, TPU_CAP_LAUNCH_COST_NS);
	EXPECT_EQ(0x100 + 8 * 12, TPU_REG_CAP(TPU_CAP_LAUNCH_COST_NS));
	EXPECT_EQ(0, DRM_TPU_PARAM_HW_VERSION);
	EXPECT_EQ(1, DRM_TPU_PARAM_HBM_SIZE);
	EXPECT_EQ(2, DRM_TPU_PARAM_VMEM_SIZE);
	EXPECT_EQ(3, DRM_TPU_PARAM_VMEM_LIMIT);
	EXPECT_EQ(4, DRM_TPU_PARAM_SMEM_SIZE);
	EXPECT_EQ(5, DRM_TPU_PARAM_CORES);
	EXPECT_EQ(6, DRM_TPU_PARAM_MXU_DIM);
	EXPECT_EQ(7, DRM_TPU_PARAM_MXU_COUNT);
	EXPECT_EQ(8, DRM_TPU_PARAM_PEAK_FLOPS_BF16);
	EXPECT_EQ(9, DRM_TPU_PARAM_PEAK_FLOPS_F32);
	EXPECT_EQ(10, DRM_TPU_PARAM_PEAK_OPS_INT8);
	EXPECT_EQ(11, DRM_TPU_PARAM_HBM_BANDWIDTH);
	EXPECT_EQ(12, DRM_TPU_PARAM_STEP_COST_NS);
	EXPECT_EQ(13, DRM_TPU_PARAM_LAUNCH_COST_NS);
	EXPECT_EQ(14, DRM_TPU_PARAM_DMA_DESCRIPTORS);
	EXPECT_EQ(20, DRM_TPU_PARAM_COMPUTE_BUSY_NS);
	/* parameters added after the queue statistics continue after them */
	EXPECT_EQ(21, DRM_TPU_PARAM_VPU_ELEMS_PER_S);
	EXPECT_EQ(22, DRM_TPU_PARAM_EUP_ELEMS_PER_S);
	EXPECT_EQ(23, DRM_TPU_PARAM_COUNT);
}

/*
 * check.sh names a parameter's TPU_EXPECT_ variable after its property
 * (hbm-size: TPU_EXPECT_HBM_SIZE), tpu_params_test after its ID.
 */
TEST(property_names_spell_ids)
{
	static const struct {
		const char *id, *name;
	} params[] = {
#define PARAM(id, field, index, name, ...) { #id, name },
		TPU_PARAMS(PARAM)
#undef PARAM
	};

	for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
		char upper[64];
		size_t j;

		for (j = 0; params[i].name[j] && j < sizeof(upper) - 1; j++)
			upper[j] = params[i].name[j] == '-' ? '_' :
				   toupper((unsigned char)params[i].name[j]);
		upper[j] = '\0';
		EXPECT_STREQ(params[i].id, upper);
	}
}

static char *read_all(FILE *f)
{
	size_t len = 0, cap = 4096, n;
	char *buf = malloc(cap);

	while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2)
			buf = realloc(buf, cap *= 2);
	}
	if (buf)
		buf[len] = '\0';
	return buf;
}

TEST(readme_table_is_generated)
{
	FILE *tool = popen(PARAMS_TOOL " --markdown", "r");
	FILE *readme = fopen(README, "r");
	char *table, *text;

	ASSERT_NE(NULL, tool);
	ASSERT_NE(NULL, readme);
	table = read_all(tool);
	text = read_all(readme);
	ASSERT_EQ(0, pclose(tool));
	fclose(readme);
	ASSERT_NE(NULL, table);
	ASSERT_NE(NULL, text);
	ASSERT_LT(100, strlen(table));
	EXPECT_NE(NULL, strstr(text, table))
		TH_LOG("README.md's table of properties differs from `%s --markdown`:\n%s",
		       PARAMS_TOOL, table);
	free(table);
	free(text);
}

TEST_HARNESS_MAIN
