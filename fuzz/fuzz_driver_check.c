// SPDX-License-Identifier: MIT
/*
 * The driver's structural check (driver/tpu_job_check.c, built for
 * userspace through fuzz/kshim/) on arbitrary descriptors, against the
 * device's decoder on the same bytes and buffer table. The driver's half
 * of "userspace cannot hand the device garbage": a descriptor the driver
 * accepts must not be refused by the device for a structural reason the
 * driver claims to check (layout, counts, enums, reserved fields, slots,
 * programs inside the code, instructions, the VMEM limit), and its arrays
 * must fit their buffers. The device may still refuse it for semantics the
 * driver leaves to it (ref spaces, shapes of ops, dtypes, bytecode).
 *
 * FUZZ_VERBOSE=1 prints every disagreement, including the allowed ones.
 */
#include "fuzz_input.h"
#include "fuzz_jobs.h"
#include "tpu_plan.h"

#include "kshim/kshim.h"

/* Refusals by the device that the driver leaves to it: the decoder's
 * messages for them. */
static const char *const semantic[] = {
	"not a VMEM ref", "dot sources must be", "must not be one of its sources",
	"accumulates into", "dot of dtypes", "contraction sizes differ",
	"the product is", "but dst", "unary op with", "takes no src1",
	"imm must be zero", "bcast smem needs", "needs", "scalar_index only",
	"zero takes only dst", "dot with fn", "dot flags on an elementwise",
	/* the vector unit's per-opcode field rules (rules/tpu_op_check.c) */
	"for opcode", "select's b may be", "reduce over axis",
	"takes integer types", ": gather ", ": prng_random_bits ",
	"argmax/argmin gives indices",
	/* bytecode the driver does not run */
	"stack underflow", "stack deeper", "leaves", "grid dimension",
	"is not scalar prefetch", "takes no argument", "empty program",
	"is not an SMEM or semaphore scratch",
	/* which loops enclose a program's op (rules/tpu_loop_check.c) */
	"but the program is inside", "reads the index of loop depth",
	/* the memory model's semantics (rules/tpu_window_check.c,
	 * rules/tpu_copy_check.c): spaces, shapes and kinds of refs */
	"copy shapes differ", "must have the same dtype", "a copy moves",
	"moves whole rows of bytes",
	"which is read-only", "semaphore scratch", "scalar_store dst",
	"dst must be (none)", "semaphores are an int32",
	"pl.Buffered", "space ANY", "squeeze", "the base's extent",
	"size[", "have no data to slice", "is not an operand or scratch",
};

static bool is_semantic(const char *message)
{
	for (size_t i = 0; i < sizeof(semantic) / sizeof(semantic[0]); i++)
		if (strstr(message, semantic[i]))
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct tpu_plan plan;
	static struct tpu_device tdev;
	static bool verbose;
	struct tpu_buffer_slot slots[FUZZ_NSLOTS];
	u64 slot_sizes[FUZZ_NSLOTS];
	struct tpu_job_result res = { 0 };
	struct tpu_config cfg;
	void *blob;
	int drv, dev;

	if (size < sizeof(struct tpu_job_header) || size > TPU_JOB_MAX_SIZE)
		return -1;	/* the driver's ioctl refuses these first */
	fuzz_config(0, &cfg);
	fuzz_slots(slots);
	for (unsigned int i = 0; i < FUZZ_NSLOTS; i++)
		slot_sizes[i] = slots[i].size;
	tdev.caps[TPU_CAP_VMEM_SIZE] = cfg.vmem_size;
	tdev.last_dbg[0] = 0;
	verbose = getenv("FUZZ_VERBOSE");
	/* a copy of exactly @size bytes, as the driver's kmalloc'd blob */
	blob = malloc(size);
	memcpy(blob, data, size);
	drv = tpu_job_check(&tdev, blob, size, slot_sizes, FUZZ_NSLOTS);
	FUZZ_ASSERT(!drv || drv == -EINVAL || drv == -ENOSPC, "driver: %d", drv);
	dev = tpu_job_decode(blob, size, &cfg, &plan, &res);
	if (!dev)
		dev = tpu_job_check_buffers(&plan, FUZZ_HBM_SIZE, slots,
					    FUZZ_NSLOTS, &res);
	if (verbose && !drv != !dev)
		fprintf(stderr, "fuzz: driver %s%s, device %s%s%s\n",
			drv ? "refuses: " : "accepts", tdev.last_dbg,
			tpu_job_error_name(dev), dev ? ": " : "",
			dev ? res.message : "");
	if (drv == -ENOSPC)
		FUZZ_ASSERT(dev, "device runs what needs more than its VMEM");
	/*
	 * Nor is the driver stricter than the device it guards, but for the
	 * instructions no program uses, which it checks all the same.
	 */
	FUZZ_ASSERT(dev || !drv || strstr(tdev.last_dbg, "rejected: instruction"),
		    "device runs it, driver refuses: %s", tdev.last_dbg);
	if (!drv && dev) {
		/* sharing HBM without an alias: the device's rule alone */
		FUZZ_ASSERT(dev != TPU_JOB_ERR_BUFFER ||
			    strstr(res.message, "share bytes of HBM"),
			    "driver accepts, device: %s", res.message);
		FUZZ_ASSERT((dev != TPU_JOB_ERR_DESCRIPTOR &&
			     dev != TPU_JOB_ERR_BYTECODE) || is_semantic(res.message),
			    "driver accepts, device: %s: %s",
			    tpu_job_error_name(dev), res.message);
	}
	free(blob);
	return 0;
}
