// SPDX-License-Identifier: MIT
/*
 * The schedule dump: a grid spec's pipeline walked on the host, step by
 * step in row-major order, with the block each operand sees and whether it
 * is fetched, skipped (same index as the previous step) or written back
 * (and read back first, pl.RevisitMode.ANY).
 * One core's view: with several cores each core's run of steps starts with
 * fresh fetches, so the device's counts can be higher. With the kernel,
 * the async copies each printed step starts (copy_walk.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt_private.h"

struct walk {
	const struct tpurt_grid_spec *gs;
	const int32_t *smem[TPU_JOB_MAX_OPERANDS];
	uint64_t smem_len[TPU_JOB_MAX_OPERANDS];
	uint64_t smem_reach[TPU_JOB_MAX_OPERANDS];
	int32_t *image;			/* the arrays' words, w->smem into it */
	int64_t cur[TPU_JOB_MAX_OPERANDS][TPURT_MAX_RANK];
	int64_t nxt[TPU_JOB_MAX_OPERANDS][TPURT_MAX_RANK];
	int64_t prev[TPU_JOB_MAX_OPERANDS][TPURT_MAX_RANK];
};

/*
 * The scalar-prefetch arrays back to back in one allocation, as the
 * device's SMEM holds them, so a load past one's end reads the next as
 * there (tpu_smem_reach); the SMEM blocks and scratch after them are not
 * modelled, so the walk's loads reach only to the last array's end.
 */
static int load_prefetch(struct walk *w, struct tpurt_array *const *args)
{
	uint64_t words = 0;
	int32_t *p;

	for (int i = 0; i < w->gs->num_prefetch; i++)
		words += tpurt_array_size(args[i]);
	w->image = p = malloc((words ? words : 1) * sizeof(*p));
	if (!p)
		return tpurt_fail(-ENOMEM, "out of memory");
	for (int i = 0; i < w->gs->num_prefetch; i++) {
		int ret;

		w->smem[i] = p;
		w->smem_len[i] = tpurt_array_size(args[i]);
		w->smem_reach[i] = words;
		words -= w->smem_len[i];
		ret = tpurt_array_read(args[i], p);
		if (ret)
			return ret;
		p += w->smem_len[i];
	}
	return 0;
}

static void unravel(const struct tpurt_grid_spec *gs, uint64_t s, int64_t *pid)
{
	for (int d = gs->rank - 1; d >= 0; d--) {
		pid[d] = (int64_t)(s % (uint64_t)gs->grid[d]);
		s /= (uint64_t)gs->grid[d];
	}
}

/* Operands in HBM (TPURT_ANY) have no blocks: only the kernel's copies
 * move them. */
static int has_blocks(const struct tpurt_operand_spec *o)
{
	return o->spec.memory_space != TPURT_ANY;
}

/* Every operand's block index at step @s into @out. */
static int indices(struct walk *w, uint64_t s, int64_t out[][TPURT_MAX_RANK])
{
	const struct tpurt_grid_spec *gs = w->gs;
	int64_t pid[TPURT_MAX_RANK];

	unravel(gs, s, pid);
	for (int i = gs->num_prefetch; i < gs->num_operands; i++) {
		int ret = !has_blocks(&gs->operand[i]) ? 0 : tpurt_program_eval(&gs->operand[i].map, pid, gs->grid,
					     w->smem, w->smem_len, w->smem_reach, out[i]);

		if (ret)
			return tpurt_fail(ret,
					  "schedule: index map of '%s' at step %llu: %s",
					  gs->operand[i].name, (unsigned long long)s,
					  ret == -EDOM ? "division by zero" :
					  "scalar-prefetch index out of range");
	}
	return 0;
}

static int same(const int64_t *a, const int64_t *b, int rank)
{
	return !memcmp(a, b, (size_t)rank * sizeof(*a));
}

static void print_index(FILE *out, const int64_t *v, int rank)
{
	for (int d = 0; d < rank; d++)
		fprintf(out, "%s%lld", d ? ", " : "", (long long)v[d]);
}

static void print_step(struct walk *w, FILE *out, uint64_t s, int last,
		       const int *fetched)
{
	const struct tpurt_grid_spec *gs = w->gs;
	int64_t pid[TPURT_MAX_RANK];

	unravel(gs, s, pid);
	fprintf(out, "step %llu (", (unsigned long long)s);
	print_index(out, pid, gs->rank);
	fprintf(out, "):");
	for (int i = gs->num_prefetch; i < gs->num_operands; i++) {
		const struct tpurt_operand_spec *o = &gs->operand[i];
		int rank = o->spec.rank;
		const char *what;

		if (!has_blocks(o)) {
			fprintf(out, "  %s hbm", o->name);
			continue;
		}
		if (o->role == TPU_ROLE_INPUT)
			what = fetched[i] ? "fetch" : "skip";
		else if (last || !same(w->cur[i], w->nxt[i], rank))
			what = fetched[i] ? "read+write" : "write";
		else
			what = fetched[i] ? "read+keep" : "keep";
		fprintf(out, "  %s[", o->name);
		print_index(out, w->cur[i], rank);
		fprintf(out, "] %s", what);
	}
	fputc('\n', out);
}

static uint64_t total_steps(const struct tpurt_grid_spec *gs)
{
	uint64_t n = 1;

	for (int d = 0; d < gs->rank; d++)
		n *= (uint64_t)gs->grid[d];
	return n;
}

/* @cw (may be NULL): the kernel's copies under each step printed. */
static int run(struct walk *w, struct tpurt_copy_walk *cw, FILE *out,
	       uint64_t max_lines, struct tpurt_schedule_counts *cnt)
{
	const struct tpurt_grid_spec *gs = w->gs;
	uint64_t steps = total_steps(gs);
	int ret = indices(w, 0, w->nxt);

	for (uint64_t s = 0; s < steps && !ret; s++) {
		int last = s + 1 == steps, fetched[TPU_JOB_MAX_OPERANDS] = { 0 };

		memcpy(w->cur, w->nxt, sizeof(w->cur));
		if (!last && (ret = indices(w, s + 1, w->nxt)))
			break;
		for (int i = gs->num_prefetch; i < gs->num_operands; i++) {
			int rank = gs->operand[i].spec.rank;

			if (!has_blocks(&gs->operand[i]))
				continue;
			if (gs->operand[i].role == TPU_ROLE_INPUT) {
				fetched[i] = !s || !same(w->cur[i], w->prev[i], rank);
				cnt->blocks_fetched += fetched[i];
				cnt->blocks_skipped += !fetched[i];
				continue;
			}
			/* pl.RevisitMode.ANY: each new block read back */
			fetched[i] = gs->operand[i].spec.revisit == TPURT_REVISIT_ANY &&
				     (!s || !same(w->cur[i], w->prev[i], rank));
			cnt->blocks_fetched += fetched[i];
			if (last || !same(w->cur[i], w->nxt[i], rank))
				cnt->blocks_written++;
		}
		memcpy(w->prev, w->cur, sizeof(w->prev));
		cnt->steps++;
		if (out && (!max_lines || s < max_lines)) {
			int64_t pid[TPURT_MAX_RANK];

			print_step(w, out, s, last, fetched);
			unravel(gs, s, pid);
			if (cw && (ret = tpurt_copy_walk_step(cw, pid, s, out)))
				break;
		}
	}
	if (!ret && out && max_lines && steps > max_lines)
		fprintf(out, "... %llu more steps\n",
			(unsigned long long)(steps - max_lines));
	return ret;
}

static int dump(const struct tpurt_grid_spec *gs, struct tpurt_copy_walk *cw,
		struct tpurt_array *const *args, int nargs, FILE *out,
		uint64_t max_lines, struct tpurt_schedule_counts *counts)
{
	struct tpurt_schedule_counts cnt = { 0 };
	struct walk *w;
	int ret;

	if (nargs < gs->num_prefetch)
		return tpurt_fail(-EINVAL,
				  "schedule: %d arrays given, the grid spec has %d scalar-prefetch operands",
				  nargs, gs->num_prefetch);
	w = calloc(1, sizeof(*w));
	if (!w)
		return tpurt_fail(-ENOMEM, "out of memory");
	w->gs = gs;
	ret = load_prefetch(w, args);
	if (!ret)
		ret = run(w, cw, out, max_lines, &cnt);
	free(w->image);
	free(w);
	if (!ret && counts)
		*counts = cnt;
	return ret;
}

int tpurt_schedule_dump(const struct tpurt_grid_spec *gs,
			struct tpurt_array *const *args, int nargs,
			FILE *out, uint64_t max_lines,
			struct tpurt_schedule_counts *counts)
{
	return dump(gs, NULL, args, nargs, out, max_lines, counts);
}

int tpurt_schedule_dump_kernel(const struct tpurt_kernel *k,
			       const struct tpurt_grid_spec *gs,
			       const struct tpurt_compiler_params *params,
			       struct tpurt_array *const *args, int nargs,
			       FILE *out, uint64_t max_lines,
			       struct tpurt_schedule_counts *counts)
{
	struct tpurt_copy_walk *cw;
	int ret = tpurt_copy_walk_create(k, gs, params, args, nargs, &cw);

	if (ret)
		return ret;
	ret = dump(gs, cw, args, nargs, out, max_lines, counts);
	tpurt_copy_walk_free(cw);
	return ret;
}
