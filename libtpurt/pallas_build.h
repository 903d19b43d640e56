/* SPDX-License-Identifier: MIT */
/*
 * One pallas_call as it is built, shared by pallas_call.c (arguments,
 * operands, scratch, the device's check) and pallas_ops.c (the kernel's
 * ops, refs and windows).
 */
#ifndef TPURT_PALLAS_BUILD_H
#define TPURT_PALLAS_BUILD_H

#include "tpurt_private.h"

/* One pallas_call's job as it is built: the call, resolved, and its
 * descriptor. */
struct pallas_build {
	const struct tpurt_kernel *k;
	const struct tpurt_grid_spec *gs;
	struct tpurt_compiler_params params;
	struct tpurt_array *const *args;
	struct tpurt_device *dev;
	const struct tpurt_device_info *info;
	struct tpurt_desc *d;
	/* the arrays, an aliased output's NULL replaced by its input's */
	struct tpurt_array *argv[TPU_JOB_MAX_OPERANDS];
	int alias[TPU_JOB_MAX_OPERANDS];	/* operand: its input, or -1 */
	/* the job's scratch: the grid spec's, the kernel's scopes, its
	 * temporaries */
	int scope_slot[TPURT_KERNEL_MAX_SCOPES];
	int slot_scope[TPURT_KERNEL_MAX_SCOPES];
	int nscope_slots;
	struct tpurt_temp_life *lives;		/* the temporaries' slots */
	int nlives;
	int slot_temp[TPURT_KERNEL_MAX_TEMPS];
	int nslots;
	/* windows, by the text and ref that made them: TPU_JOB_MAX_WINDOWS
	 * each, allocated with d (48 KB of text, too much for the stack the
	 * build is on) */
	char (*window_text)[TPURT_TEXT_MAX];
	struct tpu_job_ref *window_base;
};

/*
 * Ref @index as the call names it: operands and the grid spec's scratch in
 * Pallas's order, then the kernel's scopes and temporaries.
 */
const char *tpurt_pallas_ref_name(const struct pallas_build *c, int index);

/* The kernel's ops, with their windows and programs, into c->d. */
int tpurt_pallas_fill_ops(struct pallas_build *c);

#endif /* TPURT_PALLAS_BUILD_H */
