/* SPDX-License-Identifier: MIT */
/*
 * The kselftest convention for a missing device: a tpu selftest run where
 * there is no tpu render node (tpu.ko not loaded, no tpu-mxu device, a
 * machine without one) skips as a whole, "1..0 # SKIP ..." and exit
 * KSFT_SKIP (4), instead of failing every test in its fixture set-up.
 *
 * TPU_SELFTEST_REQUIRE_DEVICE=1 makes a missing device a failure instead:
 * scripts/check.sh sets it in the VM, where the device must be there and
 * a run of skips would hide a driver that did not load.
 *
 * Use TPU_HARNESS_MAIN in place of TEST_HARNESS_MAIN, or
 * TPU_HARNESS_MAIN_OPEN(fn) for a program that opens its device with
 * another function of tpurt_open's type (the samples' sample_open).
 */
#ifndef TPU_REQUIRE_DEVICE_H
#define TPU_REQUIRE_DEVICE_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt.h"
#include "kselftest_harness.h"

/* Return if @open_device opens a device; otherwise skip (or fail) the program. */
static inline void tpu_require_device(int (*open_device)(struct tpurt_device **))
{
	const char *require = getenv("TPU_SELFTEST_REQUIRE_DEVICE");
	struct tpurt_device *dev;
	int ret;

	ret = open_device(&dev);
	if (!ret) {
		tpurt_close(dev);
		return;
	}
	ksft_print_header();
	if (ret == -ENODEV && !(require && !strcmp(require, "1")))
		ksft_exit_skip("no tpu device: %s\n", tpurt_last_error());
	ksft_exit_fail_msg("cannot open the tpu device: %s\n", tpurt_last_error());
}

#define TPU_HARNESS_MAIN_OPEN(open_device)		\
	int main(int argc, char **argv)			\
	{						\
		tpu_require_device(open_device);	\
		return test_harness_run(argc, argv);	\
	}

#define TPU_HARNESS_MAIN TPU_HARNESS_MAIN_OPEN(tpurt_open)

#endif /* TPU_REQUIRE_DEVICE_H */
