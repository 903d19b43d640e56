/* SPDX-License-Identifier: MIT */
/*
 * What the fuzz targets share: a fixed buffer table on a tiny HBM, a few
 * device configurations, and template jobs built with tests/job_builder
 * whose arrays fit that table (the seeds of the descriptor corpora, and the
 * jobs fuzz_engine mutates).
 */
#ifndef FUZZ_JOBS_H
#define FUZZ_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "tpu_config.h"
#include "tpu_plan.h"

#define FUZZ_NSLOTS	8
#define FUZZ_SLOT_SIZE	4096u
#define FUZZ_HBM_SIZE	(FUZZ_NSLOTS * FUZZ_SLOT_SIZE)

/* Slot i is [i * FUZZ_SLOT_SIZE, +FUZZ_SLOT_SIZE) of HBM. */
static inline void fuzz_slots(struct tpu_buffer_slot slots[FUZZ_NSLOTS])
{
	for (unsigned int i = 0; i < FUZZ_NSLOTS; i++)
		slots[i] = (struct tpu_buffer_slot){ i * FUZZ_SLOT_SIZE,
						     FUZZ_SLOT_SIZE };
}

/* Configurations the decoder is tried with: defaults, then tighter ones. */
#define FUZZ_NCONFIGS	3

static inline void fuzz_config(unsigned int i, struct tpu_config *cfg)
{
	tpu_config_defaults(cfg);
	if (i == 1) {		/* a small chip: limits are hit */
		cfg->vmem_size = 64 << 10;
		cfg->vmem_limit = 16 << 10;
		cfg->smem_size = 256;
	} else if (i == 2) {	/* the default limit is all of VMEM */
		cfg->vmem_size = 1 << 20;
		cfg->vmem_limit = 1 << 20;
		cfg->smem_size = 4;
		cfg->cores = 2;
	}
}

/* Template @i (malloc'd; the caller frees) and its name, for file names. */
unsigned int fuzz_num_templates(void);
void *fuzz_template(unsigned int i, size_t *len);
const char *fuzz_template_name(unsigned int i);

#endif /* FUZZ_JOBS_H */
