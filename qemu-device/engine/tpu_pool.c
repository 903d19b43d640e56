// SPDX-License-Identifier: MIT
/*
 * Worker pool (tpu_pool.h): each worker sleeps on a condition variable
 * until the job generation moves on, runs its task if the job has one for
 * it, and counts itself done.
 */
#include "tpu_pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct tpu_pool {
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	bool busy, stopping;
	uint64_t generation;		/* one per tpu_pool_run */
	void (*fn)(void *);
	char *tasks;
	size_t size;
	unsigned int ntasks, pending;
	unsigned int workers;
	pthread_t *thread;
};

struct worker_arg {
	struct tpu_pool *pool;
	unsigned int index;
};

/*
 * Worker i runs core i + 1 (the caller's thread is core 0): named so, it
 * can be told apart in top -H and /proc/PID/task/TID/comm.
 */
static void name_thread(unsigned int index)
{
	char name[16];

	snprintf(name, sizeof(name), "tpu-core%u", index + 1);
	pthread_setname_np(pthread_self(), name);
}

static void *worker(void *p)
{
	struct worker_arg a = *(struct worker_arg *)p;
	struct tpu_pool *pool = a.pool;
	uint64_t seen = 0;

	free(p);
	name_thread(a.index);
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		while (pool->generation == seen && !pool->stopping)
			pthread_cond_wait(&pool->wake, &pool->lock);
		if (pool->stopping)
			break;
		seen = pool->generation;
		if (a.index + 1 >= pool->ntasks)
			continue;	/* no task for this worker this time */
		pthread_mutex_unlock(&pool->lock);
		pool->fn(pool->tasks + (a.index + 1) * pool->size);
		pthread_mutex_lock(&pool->lock);
		if (!--pool->pending)
			pthread_cond_signal(&pool->done);
	}
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

static bool start_worker(struct tpu_pool *pool, unsigned int i)
{
	struct worker_arg *a = malloc(sizeof(*a));

	if (!a)
		return false;
	*a = (struct worker_arg){ pool, i };
	if (pthread_create(&pool->thread[i], NULL, worker, a)) {
		free(a);
		return false;
	}
	return true;
}

struct tpu_pool *tpu_pool_create(unsigned int workers)
{
	struct tpu_pool *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return NULL;
	pool->thread = calloc(workers ? workers : 1, sizeof(*pool->thread));
	if (!pool->thread) {
		free(pool);
		return NULL;
	}
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->wake, NULL);
	pthread_cond_init(&pool->done, NULL);
	/* fewer threads than asked: the caller runs the tasks they miss */
	while (pool->workers < workers && start_worker(pool, pool->workers))
		pool->workers++;
	return pool;
}

void tpu_pool_destroy(struct tpu_pool *pool)
{
	if (!pool)
		return;
	pthread_mutex_lock(&pool->lock);
	pool->stopping = true;
	pthread_cond_broadcast(&pool->wake);
	pthread_mutex_unlock(&pool->lock);
	for (unsigned int i = 0; i < pool->workers; i++)
		pthread_join(pool->thread[i], NULL);
	pthread_cond_destroy(&pool->done);
	pthread_cond_destroy(&pool->wake);
	pthread_mutex_destroy(&pool->lock);
	free(pool->thread);
	free(pool);
}

bool tpu_pool_get(struct tpu_pool *pool)
{
	bool got;

	pthread_mutex_lock(&pool->lock);
	got = !pool->busy;
	pool->busy = true;
	pthread_mutex_unlock(&pool->lock);
	return got;
}

void tpu_pool_put(struct tpu_pool *pool)
{
	pthread_mutex_lock(&pool->lock);
	pool->busy = false;
	pthread_mutex_unlock(&pool->lock);
}

void tpu_pool_run(struct tpu_pool *pool, void (*fn)(void *), void *tasks,
		  size_t size, unsigned int n)
{
	unsigned int on_workers = n > pool->workers + 1 ? pool->workers : n - 1;

	pthread_mutex_lock(&pool->lock);
	pool->fn = fn;
	pool->tasks = tasks;
	pool->size = size;
	pool->ntasks = on_workers + 1;
	pool->pending = on_workers;
	pool->generation++;
	if (on_workers)
		pthread_cond_broadcast(&pool->wake);
	pthread_mutex_unlock(&pool->lock);

	fn(tasks);
	/* tasks no worker was started for */
	for (unsigned int i = on_workers + 1; i < n; i++)
		fn((char *)tasks + i * size);

	pthread_mutex_lock(&pool->lock);
	while (pool->pending)
		pthread_cond_wait(&pool->done, &pool->lock);
	pthread_mutex_unlock(&pool->lock);
}
