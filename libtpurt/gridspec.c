// SPDX-License-Identifier: MIT
/*
 * Grid specs: the grid, the operands with their block specs (index maps
 * compiled as they are added, so an error points at the text just given),
 * and the scratch shapes of a PrefetchScalarGridSpec.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt_private.h"

int tpurt_grid_spec_create(int rank, const int64_t *grid,
			   struct tpurt_grid_spec **gsp)
{
	struct tpurt_grid_spec *gs;
	uint64_t steps = 1;

	*gsp = NULL;
	if (rank < 1 || rank > TPU_JOB_MAX_GRID_RANK)
		return tpurt_fail(-EINVAL, "grid: rank %d not in 1..%d", rank,
				  TPU_JOB_MAX_GRID_RANK);
	for (int d = 0; d < rank; d++) {
		if (grid[d] < 1 || (uint64_t)grid[d] > TPU_JOB_MAX_DIM)
			return tpurt_fail(-EINVAL,
					  "grid: dimension %d is %lld, must be 1..%u",
					  d, (long long)grid[d], TPU_JOB_MAX_DIM);
		steps *= (uint64_t)grid[d];
		if (steps > TPU_JOB_MAX_STEPS)
			return tpurt_fail(-EINVAL, "grid: more than 2^40 steps");
	}
	gs = calloc(1, sizeof(*gs));
	if (!gs)
		return tpurt_fail(-ENOMEM, "out of memory");
	gs->rank = rank;
	memcpy(gs->grid, grid, rank * sizeof(*grid));
	*gsp = gs;
	return 0;
}

void tpurt_grid_spec_free(struct tpurt_grid_spec *gs)
{
	free(gs);
}

void tpurt_grid_spec_env(const struct tpurt_grid_spec *gs,
			 struct tpurt_index_map_env *env)
{
	env->grid_rank = gs->rank;
	env->index_names = gs->index_names[0] ? gs->index_names : NULL;
	env->num_prefetch = gs->num_prefetch;
	env->prefetch_names = gs->prefetch_names;
	env->prefetch_cols = gs->prefetch_cols;
}

int tpurt_grid_spec_set_index_names(struct tpurt_grid_spec *gs,
				    const char *names)
{
	struct tpurt_index_map_env env;
	struct tpurt_program prog;
	char probe[160];

	if (strlen(names) >= sizeof(gs->index_names))
		return tpurt_fail(-EINVAL, "grid index names '%s' too long", names);
	/* Check them by compiling a lambda that names them. */
	tpurt_grid_spec_env(gs, &env);
	env.num_prefetch = 0;
	snprintf(probe, sizeof(probe), "%s -> 0", names);
	if (tpurt_index_map_compile_as(probe, &env, 1, "grid index names", &prog))
		return -EINVAL;
	strcpy(gs->index_names, names);
	return 0;
}

/* Every ref name is unique, so the kernel can use it. */
static int check_name(const struct tpurt_grid_spec *gs, const char *name,
		      const char *kind)
{
	if (!name || !*name || strlen(name) >= TPURT_NAME_MAX || name[0] == '#' ||
	    name[0] == '%')
		return tpurt_fail(-EINVAL,
				  "%s: name '%s' must be 1..%d characters, not starting with '#' or '%%' (kernel temporaries)",
				  kind, name ? name : "(null)", TPURT_NAME_MAX - 1);
	for (int i = 0; i < gs->num_operands; i++)
		if (!strcmp(gs->operand[i].name, name))
			return tpurt_fail(-EINVAL, "%s '%s': the name is taken by an operand",
					  kind, name);
	for (int i = 0; i < gs->num_scratch; i++)
		if (!strcmp(gs->scratch[i].name, name))
			return tpurt_fail(-EINVAL, "%s '%s': the name is taken by a scratch buffer",
					  kind, name);
	return 0;
}

static int check_room(const struct tpurt_grid_spec *gs, const char *kind,
		      const char *name)
{
	if (gs->num_operands >= TPU_JOB_MAX_OPERANDS)
		return tpurt_fail(-E2BIG, "%s '%s': a job has at most %d operands",
				  kind, name, TPU_JOB_MAX_OPERANDS);
	return 0;
}

int tpurt_grid_spec_add_scalar_prefetch_shaped(struct tpurt_grid_spec *gs,
					       const char *name, int rank,
					       const int64_t *shape)
{
	struct tpurt_operand_spec *o;
	int ret = check_name(gs, name, "scalar prefetch");

	if (!ret)
		ret = check_room(gs, "scalar prefetch", name);
	if (ret)
		return ret;
	if (gs->num_inputs || gs->num_outputs)
		return tpurt_fail(-EINVAL,
				  "scalar prefetch '%s': add scalar-prefetch operands before inputs and outputs (their index maps may read them)",
				  name);
	if (rank < 0 || rank > 2 || (rank && !shape))
		return tpurt_fail(-EINVAL, "scalar prefetch '%s': rank %d, must be 1 or 2",
				  name, rank);
	for (int d = 0; d < rank; d++)
		if (shape[d] < 1 || (uint64_t)shape[d] > TPU_JOB_MAX_DIM)
			return tpurt_fail(-EINVAL, "scalar prefetch '%s': dimension %d is %lld",
					  name, d, (long long)shape[d]);
	o = &gs->operand[gs->num_operands++];
	memset(o, 0, sizeof(*o));
	strcpy(o->name, name);
	o->role = TPU_ROLE_SCALAR_PREFETCH;
	o->prefetch_rank = rank;
	for (int d = 0; d < rank; d++)
		o->prefetch_shape[d] = shape[d];
	gs->prefetch_cols[gs->num_prefetch] = rank == 2 ? shape[1] : 0;
	gs->prefetch_names[gs->num_prefetch++] = o->name;
	return 0;
}

int tpurt_grid_spec_add_scalar_prefetch(struct tpurt_grid_spec *gs,
					const char *name)
{
	return tpurt_grid_spec_add_scalar_prefetch_shaped(gs, name, 0, NULL);
}

int tpurt_grid_spec_set_dtype(struct tpurt_grid_spec *gs, const char *name,
			      enum tpurt_dtype dtype)
{
	if (!tpurt_dtype_size(dtype) && dtype != TPURT_BOOL)
		return tpurt_fail(-EINVAL, "grid spec: '%s': unknown dtype %d",
				  name ? name : "(null)", (int)dtype);
	for (int i = 0; name && i < gs->num_operands; i++) {
		struct tpurt_operand_spec *o = &gs->operand[i];

		if (strcmp(o->name, name))
			continue;
		if (o->role == TPU_ROLE_SCALAR_PREFETCH && dtype != TPURT_INT32 &&
		    dtype != TPURT_F32)
			return tpurt_fail(-EINVAL, "scalar prefetch '%s' is int32 or float32 (SMEM words)",
					  name);
		o->has_dtype = 1;
		o->dtype = dtype;
		return 0;
	}
	return tpurt_fail(-EINVAL, "grid spec: no operand named '%s'",
			  name ? name : "(null)");
}

/* Outputs follow inputs in Pallas's order: make room for an input. */
static struct tpurt_operand_spec *insert_input(struct tpurt_grid_spec *gs)
{
	int at = gs->num_prefetch + gs->num_inputs;

	memmove(&gs->operand[at + 1], &gs->operand[at],
		(gs->num_operands - at) * sizeof(gs->operand[0]));
	gs->num_operands++;
	gs->num_inputs++;
	return &gs->operand[at];
}

/* memory_space and pipeline_mode=pl.Buffered(n) of an input or output. */
static int check_space(const struct tpurt_block_spec *spec, const char *kind,
		       const char *name)
{
	if (spec->memory_space != TPURT_VMEM && spec->memory_space != TPURT_SMEM &&
	    spec->memory_space != TPURT_ANY)
		return tpurt_fail(-EINVAL, "%s '%s': memory space %d is not VMEM, SMEM or ANY (semaphores are scratch only)",
				  kind, name, (int)spec->memory_space);
	if (spec->buffer_count < 0 || spec->buffer_count > TPU_JOB_MAX_BUFFERS)
		return tpurt_fail(-EINVAL, "%s '%s': buffer_count (pl.Buffered) %d not in 1..%d (0: the default 2)",
				  kind, name, spec->buffer_count, TPU_JOB_MAX_BUFFERS);
	if (spec->buffer_count && spec->memory_space != TPURT_VMEM)
		return tpurt_fail(-EINVAL, "%s '%s': buffer_count (pl.Buffered) is for VMEM blocks only",
				  kind, name);
	return 0;
}

static void append_operand(struct tpurt_grid_spec *gs,
			   const struct tpurt_operand_spec *o, int role)
{
	if (role == TPU_ROLE_INPUT) {
		*insert_input(gs) = *o;
	} else {
		gs->operand[gs->num_operands++] = *o;
		gs->num_outputs++;
	}
}

/* pl.ANY: no block and no index map; a shape given is the array's. */
static int add_unblocked(struct tpurt_grid_spec *gs, const char *name,
			 const struct tpurt_block_spec *spec, int role)
{
	const char *kind = role == TPU_ROLE_INPUT ? "input" : "output";
	struct tpurt_operand_spec o = { .role = role };

	if (spec->rank < 0 || spec->rank > TPU_JOB_MAX_RANK)
		return tpurt_fail(-EINVAL, "%s '%s': array rank %d not in 0..%d",
				  kind, name, spec->rank, TPU_JOB_MAX_RANK);
	for (int d = 0; d < spec->rank; d++)
		if (spec->shape[d] < 1 || (uint64_t)spec->shape[d] > TPU_JOB_MAX_ARRAY_DIM)
			return tpurt_fail(-EINVAL, "%s '%s': array dimension %d is %lld",
					  kind, name, d, (long long)spec->shape[d]);
	strcpy(o.name, name);
	o.spec = *spec;
	o.spec.index_map = NULL;
	append_operand(gs, &o, role);
	return 0;
}

/* pl.Element dimensions: below the rank, not squeezed, padded alone. */
static int check_element_dims(const struct tpurt_block_spec *spec,
			      const char *kind, const char *name)
{
	if (spec->element_dims >> spec->rank)
		return tpurt_fail(-EINVAL, "%s '%s': element_dims 0x%x names dimensions beyond the block's rank %d",
				  kind, name, spec->element_dims, spec->rank);
	for (int d = 0; d < spec->rank; d++) {
		bool element = spec->element_dims >> d & 1;

		if (element && spec->shape[d] == TPURT_SQUEEZED)
			return tpurt_fail(-EINVAL, "%s '%s': dimension %d is squeezed and by element: a squeezed (None) dimension is indexed by block",
					  kind, name, d);
		if (spec->element_pad[d] && !element)
			return tpurt_fail(-EINVAL, "%s '%s': element_pad[%d] %lld: padding is of pl.Element dimensions only",
					  kind, name, d, (long long)spec->element_pad[d]);
		if (spec->element_pad[d] < 0 || spec->element_pad[d] > UINT16_MAX)
			return tpurt_fail(-EINVAL, "%s '%s': element_pad[%d] %lld, must be 0..%u",
					  kind, name, d, (long long)spec->element_pad[d],
					  UINT16_MAX);
	}
	return 0;
}

static int add_blocked(struct tpurt_grid_spec *gs, const char *name,
		       const struct tpurt_block_spec *spec, int role)
{
	const char *kind = role == TPU_ROLE_INPUT ? "input" : "output";
	struct tpurt_operand_spec o = { .role = role };
	struct tpurt_index_map_env env;
	char what[96];
	int ret = check_name(gs, name, kind);

	if (!ret)
		ret = check_room(gs, kind, name);
	if (ret)
		return ret;
	ret = check_space(spec, kind, name);
	if (ret)
		return ret;
	if (spec->memory_space == TPURT_ANY)
		return add_unblocked(gs, name, spec, role);
	if (spec->rank < 1 || spec->rank > TPU_JOB_MAX_RANK)
		return tpurt_fail(-EINVAL, "%s '%s': block rank %d not in 1..%d",
				  kind, name, spec->rank, TPU_JOB_MAX_RANK);
	for (int d = 0; d < spec->rank; d++)
		if (spec->shape[d] != TPURT_SQUEEZED &&
		    (spec->shape[d] < 1 || (uint64_t)spec->shape[d] > TPU_JOB_MAX_DIM))
			return tpurt_fail(-EINVAL,
					  "%s '%s': block dimension %d is %lld, must be 1..%u or TPURT_SQUEEZED",
					  kind, name, d, (long long)spec->shape[d],
					  TPU_JOB_MAX_DIM);
	ret = check_element_dims(spec, kind, name);
	if (ret)
		return ret;
	if (!spec->index_map || strlen(spec->index_map) >= sizeof(o.map_text))
		return tpurt_fail(-EINVAL, "%s '%s': index map missing or over %zu characters",
				  kind, name, sizeof(o.map_text) - 1);
	snprintf(what, sizeof(what), "index map of %s '%s'", kind, name);
	tpurt_grid_spec_env(gs, &env);
	ret = tpurt_index_map_compile_as(spec->index_map, &env, spec->rank,
					 what, &o.map);
	if (ret)
		return ret;
	strcpy(o.name, name);
	strcpy(o.map_text, spec->index_map);
	o.spec = *spec;
	o.spec.index_map = NULL;
	append_operand(gs, &o, role);
	return 0;
}

int tpurt_grid_spec_add_input(struct tpurt_grid_spec *gs, const char *name,
			      const struct tpurt_block_spec *spec)
{
	return add_blocked(gs, name, spec, TPU_ROLE_INPUT);
}

int tpurt_grid_spec_add_output(struct tpurt_grid_spec *gs, const char *name,
			       const struct tpurt_block_spec *spec)
{
	return add_blocked(gs, name, spec, TPU_ROLE_OUTPUT);
}

int tpurt_grid_spec_add_scratch(struct tpurt_grid_spec *gs, const char *name,
				enum tpurt_memory_space space,
				enum tpurt_dtype dtype, int rank,
				const int64_t *shape)
{
	struct tpurt_scratch_spec *s;
	int ret = check_name(gs, name, "scratch"), sem;

	if (ret)
		return ret;
	if (gs->num_scratch >= TPU_JOB_MAX_SCRATCH)
		return tpurt_fail(-E2BIG, "scratch '%s': a job has at most %d scratch buffers",
				  name, TPU_JOB_MAX_SCRATCH);
	sem = space == TPURT_SEMAPHORE_DMA || space == TPURT_SEMAPHORE_REGULAR;
	if (space != TPURT_VMEM && space != TPURT_SMEM && !sem)
		return tpurt_fail(-EINVAL, "scratch '%s': memory space %d is not VMEM, SMEM or a semaphore type (ANY is for operands)",
				  name, (int)space);
	if (!tpurt_dtype_size(dtype))
		return tpurt_fail(-EINVAL, "scratch '%s': unknown dtype %d", name,
				  (int)dtype);
	if (sem && dtype != TPURT_INT32)
		return tpurt_fail(-EINVAL, "scratch '%s': semaphores are an int32 array, not %s",
				  name, tpurt_dtype_name(dtype));
	if (rank < 1 || rank > TPU_JOB_MAX_RANK)
		return tpurt_fail(-EINVAL, "scratch '%s': rank %d not in 1..%d",
				  name, rank, TPU_JOB_MAX_RANK);
	if (sem && !tpurt_semaphore_count_ok(rank, shape))
		return tpurt_fail(-EINVAL, "scratch '%s': %lld semaphores, must be 1..%d",
				  name, (long long)tpurt_semaphore_count(rank, shape),
				  TPU_JOB_MAX_SEMAPHORES);
	for (int d = 0; d < rank; d++)
		if (shape[d] < 1 || (uint64_t)shape[d] > TPU_JOB_MAX_DIM)
			return tpurt_fail(-EINVAL,
					  "scratch '%s': dimension %d is %lld, must be 1..%u",
					  name, d, (long long)shape[d], TPU_JOB_MAX_DIM);
	s = &gs->scratch[gs->num_scratch++];
	strcpy(s->name, name);
	s->space = space;
	s->dtype = dtype;
	s->rank = rank;
	memcpy(s->shape, shape, rank * sizeof(*shape));
	return 0;
}
