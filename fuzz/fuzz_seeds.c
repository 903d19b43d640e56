// SPDX-License-Identifier: MIT
/*
 * Writes the fuzz targets' seed corpora into DIR/<target>/: the template
 * jobs of fuzz_jobs.c (tests/job_builder) as raw descriptors for the
 * decoder and the driver's check, as template choices for fuzz_engine_job,
 * the templates' kinds of programs for fuzz_scalar, and DMA descriptors
 * with their SG lists for fuzz_dma_copy.
 *
 *   fuzz-seeds DIR
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_jobs.h"
#include "tpu_hw.h"

static const char *top;

static void put(const char *target, const char *name, const void *p, size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", top, target);
	if (mkdir(path, 0777) && errno != EEXIST) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/%s", top, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static void job_seeds(void)
{
	for (unsigned int t = 0; t < fuzz_num_templates(); t++) {
		const char *name = fuzz_template_name(t);
		/* HBM of small integers, ones, bytes; zeros where they index */
		uint8_t fill = strstr(name, "sparse") ? 0 : 1 + t % 3;
		uint8_t choice[2] = { (uint8_t)t, fill };
		size_t len;
		void *blob = fuzz_template(t, &len);

		put("job_decode", name, blob, len);
		put("driver_check", name, blob, len);
		put("engine_job", name, choice, sizeof(choice));
		free(blob);
	}
}

/* fuzz_scalar's format: see fuzz_scalar.c. */
#define OP(op, arg)	((uint8_t)((op) | (arg) << 5))
#define WIDE(op)	((uint8_t)((op) | 0x80))
#define I32(v)		(uint8_t)(v), (uint8_t)((v) >> 8), (uint8_t)((v) >> 16), \
			(uint8_t)((uint32_t)(v) >> 24)
#define U32(v)		I32(v)
#define U64(v)		I32(v), 0, 0, 0, 0

static void scalar_seeds(void)
{
	/* i, j, k -> i, k */
	static const uint8_t index_map[] = {
		3, 0, 2, U32(4), U32(4), U32(2), U64(1), U64(3), U64(1),
		2, OP(TPU_INSN_PUSH_PID, 0), OP(TPU_INSN_PUSH_PID, 2),
	};
	/* program_id(2) == num_programs(2) - 1 */
	static const uint8_t last_k[] = {
		3, 0, 1, U32(4), U32(4), U32(2), U64(1), U64(3), U64(1),
		5, OP(TPU_INSN_PUSH_PID, 2), OP(TPU_INSN_PUSH_NPROG, 2),
		OP(TPU_INSN_PUSH_CONST, 1), OP(TPU_INSN_SUB, 0), OP(TPU_INSN_EQ, 0),
	};
	/* i, j, s -> s[i], j */
	static const uint8_t block_sparse[] = {
		2, 1, 2, U32(4), U32(3), U64(2), U64(1), 4, I32(3), I32(0), I32(2), I32(1),
		3, OP(TPU_INSN_PUSH_PID, 0), OP(TPU_INSN_LOAD_SMEM, 0),
		OP(TPU_INSN_PUSH_PID, 1),
	};
	/* -7 // 2, INT32_MIN % -1, (3 < 1) or not (2 >= 1 and 3 != 3) */
	static const uint8_t arith[] = {
		1, 0, 3, U32(1), U64(0),
		14, WIDE(TPU_INSN_PUSH_CONST), I32(-7), OP(TPU_INSN_PUSH_CONST, 2),
		OP(TPU_INSN_DIV, 0), WIDE(TPU_INSN_PUSH_CONST), I32(0x80000000),
		WIDE(TPU_INSN_PUSH_CONST), I32(-1), OP(TPU_INSN_MOD, 0),
		OP(TPU_INSN_PUSH_CONST, 3), OP(TPU_INSN_PUSH_CONST, 1),
		OP(TPU_INSN_LT, 0), OP(TPU_INSN_PUSH_CONST, 2),
		OP(TPU_INSN_PUSH_CONST, 1), OP(TPU_INSN_GE, 0), OP(TPU_INSN_NOT, 0),
		OP(TPU_INSN_OR, 0),
	};

	put("scalar", "index_map", index_map, sizeof(index_map));
	put("scalar", "last_k", last_k, sizeof(last_k));
	put("scalar", "block_sparse", block_sparse, sizeof(block_sparse));
	put("scalar", "arith", arith, sizeof(arith));
}

/* fuzz_dma_copy's format: descriptor, flags, guest memory from 0. */
struct dma_seed {
	struct tpu_dma_desc d;
	uint8_t flags;
	uint8_t ram[0x2100];
} __attribute__((packed));

static void sg(struct dma_seed *s, uint64_t at, uint64_t addr, uint64_t len)
{
	struct tpu_sg_entry e = { addr, len };

	memcpy(s->ram + at, &e, sizeof(e));
}

static void put_dma(const char *name, struct dma_seed *s, size_t ram_used)
{
	put("dma_copy", name, s, offsetof(struct dma_seed, ram) + ram_used);
	memset(s, 0, sizeof(*s));
}

static void dma_seeds(void)
{
	static struct dma_seed s;

	s.d = (struct tpu_dma_desc){ .op = TPU_DMA_OP_H2D, .sg_count = 1,
				     .hbm_offset = 0x100, .length = 0x200 };
	s.flags = 7 << 1;
	sg(&s, 0, 0x1000, 0x200);
	put_dma("h2d", &s, 0x10);

	/* a segment's last entry links to the next segment */
	s.d = (struct tpu_dma_desc){ .op = TPU_DMA_OP_H2D, .sg_count = 2,
				     .length = 0x200, .sg_addr = 0xfe0 };
	s.flags = 3 << 1;
	sg(&s, 0xfe0, 0x1000, 0x100);
	sg(&s, 0xff0, 0x2000, TPU_SG_LINK);
	sg(&s, 0x2000, 0x1100, 0x100);
	put_dma("h2d_linked", &s, 0x2010);

	s.d = (struct tpu_dma_desc){ .op = TPU_DMA_OP_D2H, .sg_count = 2,
				     .hbm_offset = 0x30, .length = 0x90 };
	sg(&s, 0, 0x800, 0x10);
	sg(&s, 0x10, 0x900, 0x80);
	put_dma("d2h_small_maps", &s, 0x20);

	/* a list that links back to itself */
	s.d = (struct tpu_dma_desc){ .op = TPU_DMA_OP_H2D, .sg_count = 4,
				     .length = 4 };
	sg(&s, 0, 0x1000, 1);
	sg(&s, 0x10, 0, TPU_SG_LINK);
	put_dma("h2d_loop", &s, 0x20);

	/* data in the hole that is not RAM */
	s.d = (struct tpu_dma_desc){ .op = TPU_DMA_OP_D2H, .sg_count = 1,
				     .length = 0x100 };
	sg(&s, 0, 0x3000, 0x100);
	put_dma("d2h_fault", &s, 0x10);

	s.d = (struct tpu_dma_desc){ .op = TPU_DMA_OP_D2D, .hbm_offset = 0x10,
				     .hbm_offset2 = 0x20, .length = 0x100 };
	put_dma("d2d_overlap", &s, 0);

	s.d = (struct tpu_dma_desc){ .op = TPU_DMA_OP_FILL, .hbm_offset = 0x40,
				     .length = 0x80, .pattern = 0xab };
	put_dma("fill", &s, 0);

	s.d = (struct tpu_dma_desc){ .op = TPU_DMA_OP_FILL, .length = 0x4000 };
	s.flags = 1;
	put_dma("fill_aborted", &s, 0);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz-seeds DIR\n");
		return 2;
	}
	top = argv[1];
	mkdir(top, 0777);
	job_seeds();
	scalar_seeds();
	dma_seeds();
	return 0;
}
