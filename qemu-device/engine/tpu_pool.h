/* SPDX-License-Identifier: MIT */
/*
 * The engine's worker threads, created once with the engine instead of per
 * job: a thread start and its first-touch faults cost more than a small
 * job, and the threads keep their GEMM scratch warm from job to job.
 */
#ifndef TPU_POOL_H
#define TPU_POOL_H

#include <stdbool.h>
#include <stddef.h>

struct tpu_pool;

/* A pool of @workers threads (0 is valid: the caller runs everything). */
struct tpu_pool *tpu_pool_create(unsigned int workers);
void tpu_pool_destroy(struct tpu_pool *pool);

/*
 * Take the pool for one job; false if another job holds it (the caller
 * then runs its job some other way). The holder owns whatever it keeps
 * beside the pool (the engine's VMEM) until tpu_pool_put().
 */
bool tpu_pool_get(struct tpu_pool *pool);
void tpu_pool_put(struct tpu_pool *pool);

/*
 * With the pool held: run @fn on @n tasks, the @i-th at @tasks + i * @size;
 * task 0 on the calling thread, task i on worker i - 1. Returns when all
 * are done. @n may not exceed the workers plus one.
 */
void tpu_pool_run(struct tpu_pool *pool, void (*fn)(void *), void *tasks,
		  size_t size, unsigned int n);

#endif /* TPU_POOL_H */
