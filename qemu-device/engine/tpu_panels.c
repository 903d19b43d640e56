// SPDX-License-Identifier: MIT
/*
 * Both caches are open-addressed tables probed from a hash of the source
 * address alone, so the prefetcher can find a block's packing without
 * knowing its layout. The shared table is filled by whichever core packs
 * a block first: an entry's state word holds the hash's tag and whether it
 * is being packed or ready, set by compare-and-swap, and its key and
 * buffer are published by the release store that makes it ready. A core
 * that finds an entry still being packed packs a copy of its own.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tpu_dtype.h"
#include "tpu_panels.h"

#define SHARED_ENTRIES	(1u << 14)
#define CORE_ENTRIES	(1u << 10)
#define PROBES		32
#define ALIGN		64

/* State word: the hash's tag above, the entry's status in the low bits. */
enum { FREE, PACKING, READY, NO_ROOM, STATUS_MASK = 3 };

struct tpu_panel {
	_Atomic uint64_t state;
	struct tpu_panel_key key;
	float *buf;
	size_t bytes;
};

/* An input array no one writes during the job, in host memory. */
struct stable_range {
	const uint8_t *p, *end;
};

/* A core's own cache, made when it first packs. */
struct core_panels {
	uint8_t *arena;			/* TPU_PANELS_CORE_MAX, reserved */
	uint64_t used;
	struct tpu_panel entry[CORE_ENTRIES];
};

struct tpu_panels {
	struct stable_range range[TPU_JOB_MAX_OPERANDS];
	unsigned int nranges;
	uint8_t *arena;			/* TPU_PANELS_SHARED_MAX, reserved */
	_Atomic uint64_t used;
	struct tpu_panel entry[SHARED_ENTRIES];
	struct core_panels *core[TPU_MAX_CORES];
};

/* The job and core the calling thread runs. */
static _Thread_local struct tpu_panels *bound;
static _Thread_local unsigned int bound_core;
static _Thread_local uint64_t reused_here;

static atomic_bool disabled;
static _Atomic uint64_t reused_total;

/* The tag (never 0) in the low bits but the status's, the slot on top. */
static uint64_t hash(const void *src)
{
	uint64_t h = (uint64_t)(uintptr_t)src * 0x9e3779b97f4a7c15ull;

	return (h ^ h >> 29) | (STATUS_MASK + 1);
}

static uint64_t tag(uint64_t state)
{
	return state & ~(uint64_t)STATUS_MASK;
}

static unsigned int slot(uint64_t h, unsigned int n, unsigned int entries)
{
	return (unsigned int)((h >> 40) + n) % entries;
}

/* Bytes [@p, @end) of operand @i's array. */
static void array_bytes(const struct tpu_run *run, unsigned int i,
			const uint8_t **p, const uint8_t **end)
{
	const struct tpu_plan_operand *o = &run->plan->operand[i];

	*p = run->hbm + run->slots[o->slot].offset + o->offset;
	*end = *p + o->elems * tpu_dtype_size(o->dtype);
}

static bool overlap(const uint8_t *a, const uint8_t *a_end, const uint8_t *b,
		    const uint8_t *b_end)
{
	return a < b_end && b < a_end;
}

/* Written during the job: an output's array, the trace and print buffers. */
static bool written(const struct tpu_run *run, const uint8_t *p,
		    const uint8_t *end)
{
	const struct tpu_plan *plan = run->plan;
	const uint8_t *q, *q_end;

	for (unsigned int i = 0; i < plan->num_operands; i++) {
		if (plan->operand[i].role != TPU_ROLE_OUTPUT)
			continue;
		array_bytes(run, i, &q, &q_end);
		if (overlap(p, end, q, q_end))
			return true;
	}
	if (plan->flags & TPU_JOB_F_TRACE) {
		q = run->hbm + run->slots[plan->trace_slot].offset;
		if (overlap(p, end, q, q + run->slots[plan->trace_slot].size))
			return true;
	}
	if (plan->flags & TPU_JOB_F_PRINT) {
		q = run->hbm + run->slots[plan->print_slot].offset;
		if (overlap(p, end, q, q + run->slots[plan->print_slot].size))
			return true;
	}
	return false;
}

static void *reserve(uint64_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);
	return p;
}

struct tpu_panels *tpu_panels_new(void)
{
	struct tpu_panels *c = calloc(1, sizeof(*c));

	if (c && !(c->arena = reserve(TPU_PANELS_SHARED_MAX))) {
		free(c);
		c = NULL;
	}
	return c;
}

void tpu_panels_free(struct tpu_panels *c)
{
	if (!c)
		return;
	for (unsigned int i = 0; i < TPU_MAX_CORES; i++) {
		if (!c->core[i])
			continue;
		munmap(c->core[i]->arena, TPU_PANELS_CORE_MAX);
		free(c->core[i]);
	}
	munmap(c->arena, TPU_PANELS_SHARED_MAX);
	free(c);
}

/* The last job's packings are not this one's: forget them. */
static void forget(struct tpu_panels *c)
{
	if (atomic_load_explicit(&c->used, memory_order_relaxed))
		memset(c->entry, 0, sizeof(c->entry));
	atomic_store_explicit(&c->used, 0, memory_order_relaxed);
	for (unsigned int i = 0; i < TPU_MAX_CORES; i++) {
		if (!c->core[i] || !c->core[i]->used)
			continue;
		memset(c->core[i]->entry, 0, sizeof(c->core[i]->entry));
		c->core[i]->used = 0;
	}
}

void tpu_panels_open(struct tpu_run *run, struct tpu_panels *c)
{
	const struct tpu_plan *plan = run->plan;

	run->panels = NULL;
	/* debug mode copies every block: none is read in place */
	if (!c || run->model_only || run->debug || !run->hbm ||
	    atomic_load(&disabled))
		return;
	c->nranges = 0;
	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];
		struct stable_range *r = &c->range[c->nranges];

		if (o->role != TPU_ROLE_INPUT || o->space != TPU_MEM_VMEM)
			continue;
		array_bytes(run, i, &r->p, &r->end);
		if (r->p < r->end && !written(run, r->p, r->end))
			c->nranges++;
	}
	if (!c->nranges)
		return;
	forget(c);
	run->panels = c;
}

void tpu_panels_bind(const struct tpu_core *core)
{
	if (!core) {
		atomic_fetch_add(&reused_total, reused_here);
		reused_here = 0;
	}
	bound = core ? core->run->panels : NULL;
	bound_core = core ? core->id : 0;
}

static bool stable(const struct tpu_panels *c, const void *src, uint64_t span)
{
	const uint8_t *p = src;

	for (unsigned int i = 0; i < c->nranges; i++)
		if (p >= c->range[i].p && p < c->range[i].end &&
		    span <= (uint64_t)(c->range[i].end - p))
			return true;
	return false;
}

static bool same_key(const struct tpu_panel_key *a, const struct tpu_panel_key *b)
{
	return a->src == b->src && a->rows == b->rows && a->cols == b->cols &&
	       a->rs == b->rs && a->cs == b->cs && a->layout == b->layout;
}

static uint64_t round_up(uint64_t n)
{
	return (n + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
}

/* The job-wide table: several cores look up and fill it at once. */
static float *shared_get(struct tpu_panels *c, const struct tpu_panel_key *key,
			 size_t bytes, struct tpu_panel **fill)
{
	uint64_t h = hash(key->src);

	for (unsigned int n = 0; n < PROBES; n++) {
		struct tpu_panel *e = &c->entry[slot(h, n, SHARED_ENTRIES)];
		uint64_t s = atomic_load_explicit(&e->state, memory_order_acquire);
		uint64_t at;

		if (s == FREE &&
		    atomic_compare_exchange_strong(&e->state, &s, h | PACKING)) {
			e->key = *key;
			at = atomic_fetch_add_explicit(&c->used, round_up(bytes),
						       memory_order_relaxed);
			if (at + bytes > TPU_PANELS_SHARED_MAX) {
				atomic_store_explicit(&e->state, h | NO_ROOM,
						      memory_order_release);
				return NULL;
			}
			e->buf = (float *)(c->arena + at);
			e->bytes = bytes;
			*fill = e;
			return e->buf;
		}
		if (tag(s) != tag(h))
			continue;
		if ((s & STATUS_MASK) == PACKING)
			return NULL;	/* another core's: pack a copy */
		if (same_key(&e->key, key))
			return (s & STATUS_MASK) == READY && e->bytes == bytes ?
			       e->buf : NULL;
	}
	return NULL;
}

/* Only the calling core touches its own. */
static struct core_panels *core_panels(struct tpu_panels *c)
{
	struct core_panels *m = c->core[bound_core];

	if (m)
		return m;
	m = calloc(1, sizeof(*m));
	if (m)
		m->arena = reserve(TPU_PANELS_CORE_MAX);
	if (m && !m->arena) {
		free(m);
		m = NULL;
	}
	c->core[bound_core] = m;
	return m;
}

/* The core's own table: emptied when it is full. */
static float *core_get(struct tpu_panels *c, const struct tpu_panel_key *key,
		       size_t bytes, struct tpu_panel **fill)
{
	struct core_panels *m = core_panels(c);
	uint64_t h = hash(key->src);
	struct tpu_panel *e = NULL;

	if (!m || bytes > TPU_PANELS_CORE_MAX)
		return NULL;
	for (unsigned int n = 0; n < PROBES; n++) {
		e = &m->entry[slot(h, n, CORE_ENTRIES)];
		if (e->state == FREE)
			break;
		if (tag(e->state) == tag(h) && same_key(&e->key, key))
			return e->bytes == bytes ? e->buf : NULL;
		e = NULL;
	}
	if (!e || m->used + bytes > TPU_PANELS_CORE_MAX) {
		memset(m->entry, 0, sizeof(m->entry));
		m->used = 0;
		e = &m->entry[slot(h, 0, CORE_ENTRIES)];
	}
	*e = (struct tpu_panel){ h | PACKING, *key,
				 (float *)(m->arena + m->used), bytes };
	m->used += round_up(bytes);
	*fill = e;
	return e->buf;
}

float *tpu_panels_get(enum tpu_panels_kind kind, const struct tpu_panel_key *key,
		      uint64_t span, size_t bytes, struct tpu_panel **fill)
{
	struct tpu_panels *c = bound;
	float *p;

	*fill = NULL;
	if (!c || !stable(c, key->src, span))
		return NULL;
	p = kind == TPU_PANELS_SHARED ? shared_get(c, key, bytes, fill) :
					core_get(c, key, bytes, fill);
	reused_here += p && !*fill;
	return p;
}

void tpu_panels_filled(struct tpu_panel *p)
{
	atomic_store_explicit(&p->state, tag(p->state) | READY,
			      memory_order_release);
}

static const struct tpu_panel *find_in(struct tpu_panel *entry,
				       unsigned int n, const void *src)
{
	uint64_t h = hash(src);

	for (unsigned int i = 0; i < PROBES; i++) {
		struct tpu_panel *e = &entry[slot(h, i, n)];
		uint64_t s = atomic_load_explicit(&e->state, memory_order_acquire);

		if (s == FREE)
			return NULL;
		if (tag(s) == tag(h) && (s & STATUS_MASK) == READY &&
		    e->key.src == src)
			return e;
	}
	return NULL;
}

const void *tpu_panels_find(const void *src, size_t *bytes)
{
	const struct tpu_panel *e;

	if (!bound)
		return NULL;
	e = find_in(bound->entry, SHARED_ENTRIES, src);
	if (!e && bound->core[bound_core])
		e = find_in(bound->core[bound_core]->entry, CORE_ENTRIES, src);
	if (!e)
		return NULL;
	*bytes = e->bytes;
	return e->buf;
}

void tpu_panels_use(bool on)
{
	atomic_store(&disabled, !on);
}

uint64_t tpu_panels_reused(void)
{
	return atomic_load(&reused_total);
}
