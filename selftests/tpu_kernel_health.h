/* SPDX-License-Identifier: MIT */
/*
 * Whether the guest kernel stayed healthy and the driver freed what it
 * held: the kernel log since a mark (/dev/kmsg) scanned for warnings,
 * BUGs and oopses; the taint flags those set; and the driver's debugfs
 * "usage" (HBM held by buffers, jobs not yet freed) and DRM's "clients"
 * (open files), read through the render node's debugfs directory, and the
 * job reports in use in the device's DMA pool (sysfs "pools").
 */
#ifndef TPU_KERNEL_HEALTH_H
#define TPU_KERNEL_HEALTH_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Taint bits a kernel complaint sets: bad page, oops, warning, lockup. */
#define TPU_TAINT_COMPLAINTS	((1ul << 5) | (1ul << 7) | (1ul << 9) | (1ul << 14))

static inline unsigned long tpu_taint(void)
{
	unsigned long taint = 0;
	FILE *f = fopen("/proc/sys/kernel/tainted", "r");

	if (f) {
		if (fscanf(f, "%lu", &taint) != 1)
			taint = 0;
		fclose(f);
	}
	return taint;
}

/* A reader of the kernel log from now on, or -errno. */
static inline int tpu_kmsg_mark(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	lseek(fd, 0, SEEK_END);
	return fd;
}

/*
 * Read the log since the mark; count the lines that say the kernel
 * complained, the first one in @first. Closes @fd. -errno if unreadable.
 */
static inline int tpu_kmsg_complaints(int fd, char *first, size_t len)
{
	static const char *const bad[] = {
		"WARNING:", "BUG:", "Oops", "general protection", "Call Trace",
		"kernel BUG", "refcount_t:", "list_add corruption",
		"list_del corruption", "UBSAN:", "KASAN:", "kmemleak",
		"circular locking", "INFO: task", "rcu_sched self-detected",
		"soft lockup", "hard LOCKUP",
	};
	char rec[2048];
	int n = 0;

	if (first && len)
		first[0] = '\0';
	for (;;) {
		ssize_t got = read(fd, rec, sizeof(rec) - 1);
		const char *msg;

		if (got < 0 && errno == EPIPE)
			continue;	/* overwritten records: go on */
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		rec[got] = '\0';
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			if (!strstr(msg, bad[i]))
				continue;
			if (!n++ && first && len)
				snprintf(first, len, "%.*s", (int)strcspn(msg, "\n"), msg);
			break;
		}
	}
	close(fd);
	return n;
}

/* /sys/kernel/debug/dri/<minor>/@name for the render node @fd. */
static inline void tpu_debugfs_path(int fd, const char *name, char *path,
				    size_t len)
{
	struct stat st;

	fstat(fd, &st);
	snprintf(path, len, "/sys/kernel/debug/dri/%u/%s", minor(st.st_rdev),
		 name);
}

/*
 * A counter of a queue's line in debugfs "queues" ("tpu-q1" the compute
 * queue, "tpu-q0" the DMA queue; "polled", "held", "irqs"), or -1.
 */
static inline long tpu_queue_count(int fd, const char *queue, const char *name)
{
	char path[96], line[256], key[32];
	size_t qlen = strlen(queue);
	const char *at;
	long n = -1;
	FILE *f;

	snprintf(key, sizeof(key), " %s ", name);
	tpu_debugfs_path(fd, "queues", path, sizeof(path));
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, queue, qlen) && line[qlen] == ':' &&
		    (at = strstr(line, key)))
			n = strtol(at + strlen(key), NULL, 10);
	fclose(f);
	return n;
}

struct tpu_usage {
	uint64_t hbm_bytes;	/* HBM held by buffers */
	uint64_t hbm_buffers;
	int jobs_alive;		/* jobs and copies not yet freed */
	int clients;		/* open files of the device */
	int reports;		/* job reports (records) not yet freed */
};

/*
 * Blocks in use in the device's DMA pool @pool, from the PCI device's
 * sysfs "pools" (a header line, then "name in-use total size pages").
 */
static inline int tpu_dma_pool_in_use(int fd, const char *pool)
{
	char path[96], line[256], name[64];
	struct stat st;
	int used = -1, n;
	FILE *f;

	fstat(fd, &st);
	snprintf(path, sizeof(path), "/sys/dev/char/%u:%u/device/pools",
		 major(st.st_rdev), minor(st.st_rdev));
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %d", name, &n) == 2 && !strcmp(name, pool))
			used = n;
	}
	fclose(f);
	return used;
}

/* The driver's usage now; 0 or -errno (-ENOENT: no debugfs). */
static inline int tpu_usage_read(int fd, struct tpu_usage *u)
{
	char path[96], line[256];
	int n;
	FILE *f;

	tpu_debugfs_path(fd, "usage", path, sizeof(path));
	f = fopen(path, "r");
	if (!f)
		return -errno;
	n = fscanf(f, "hbm bytes: %lu hbm buffers: %lu jobs alive: %d",
		   &u->hbm_bytes, &u->hbm_buffers, &u->jobs_alive);
	fclose(f);
	if (n != 3)
		return -EINVAL;
	/* DRM's own list of open files: a header line, then one per file. */
	tpu_debugfs_path(fd, "clients", path, sizeof(path));
	f = fopen(path, "r");
	if (!f)
		return -errno;
	u->clients = -1;
	while (fgets(line, sizeof(line), f))
		u->clients++;
	fclose(f);
	u->reports = tpu_dma_pool_in_use(fd, "tpu-job-report");
	return 0;
}

/*
 * Wait up to @seconds for the usage to come back to @want: everything a
 * closed file held freed. 0, or -ETIMEDOUT with the last reading in @now.
 */
static inline int tpu_usage_settle(int fd, const struct tpu_usage *want,
				   double seconds, struct tpu_usage *now)
{
	for (int i = 0; i <= seconds * 20; i++) {
		if (tpu_usage_read(fd, now))
			return -EIO;
		if (now->hbm_bytes == want->hbm_bytes &&
		    now->hbm_buffers == want->hbm_buffers &&
		    now->jobs_alive == want->jobs_alive &&
		    now->clients == want->clients &&
		    now->reports == want->reports)
			return 0;
		usleep(50000);
	}
	return -ETIMEDOUT;
}

/*
 * The usage once no job is left alive, waiting up to @seconds: a test's
 * baseline must not count a job an earlier test has not freed yet (the
 * scheduler frees finished jobs in its own time). 0, -ETIMEDOUT with the
 * last reading in @now, or tpu_usage_read()'s error.
 */
static inline int tpu_usage_quiet(int fd, double seconds, struct tpu_usage *now)
{
	for (int i = 0; i <= seconds * 20; i++) {
		int ret = tpu_usage_read(fd, now);

		if (ret || !now->jobs_alive)
			return ret;
		usleep(50000);
	}
	return -ETIMEDOUT;
}

#endif /* TPU_KERNEL_HEALTH_H */
