// SPDX-License-Identifier: GPL-2.0-only
/*
 * debugfs: the queues' state, what the device's users hold (so tests can
 * see that a closed or killed file freed everything), and a way to reset
 * the queues on demand so that recovery can be tested without a job that
 * hangs.
 */
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <drm/drm_debugfs.h>
#include <drm/drm_file.h>

#include "tpu_debugfs.h"
#include "tpu_device.h"
#include "tpu_hw.h"
#include "tpu_ring.h"
#include "tpu_sched.h"

/*
 * "held" is the device's count of interrupts it did not send because a
 * waiter polled (ABI 1.2); an older device has no such register.
 */
static void tpu_debugfs_show_ring(struct seq_file *m, struct tpu_ring *ring)
{
	struct tpu_device *tdev = ring->tdev;

	seq_printf(m, "%s: driver head %u tail %u, device head %u status 0x%x done %u errors %u polled %u irqs %u",
		   ring->name, ring->head, ring->tail,
		   tpu_reg_read(tdev, TPU_REG_Q(ring->queue, TPU_Q_HEAD)),
		   tpu_reg_read(tdev, TPU_REG_Q(ring->queue, TPU_Q_STATUS)),
		   tpu_reg_read(tdev, TPU_REG_Q(ring->queue, TPU_Q_DONE)),
		   tpu_reg_read(tdev, TPU_REG_Q(ring->queue, TPU_Q_ERRORS)),
		   ring->polled, ring->irqs);
	if (TPU_VERSION_MINOR(tdev->hw_version) >= 2)
		seq_printf(m, " held %u",
			   tpu_reg_read(tdev, TPU_REG_Q(ring->queue, TPU_Q_IRQS_HELD)));
	seq_putc(m, '\n');
}

static int tpu_debugfs_queues_show(struct seq_file *m, void *unused)
{
	struct tpu_device *tdev = m->private;

	tpu_debugfs_show_ring(m, &tdev->dma_queue.ring);
	tpu_debugfs_show_ring(m, &tdev->compute_queue.ring);
	seq_printf(m, "device resets: %u\n",
		   tpu_reg_read(tdev, TPU_REG_RESET_COUNT));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tpu_debugfs_queues);

/* HBM allocated to buffers, and jobs pushed to a scheduler and not yet freed. */
static int tpu_debugfs_usage_show(struct seq_file *m, void *unused)
{
	struct tpu_device *tdev = m->private;
	struct drm_mm_node *node;
	u64 bytes = 0, buffers = 0;

	mutex_lock(&tdev->hbm_lock);
	drm_mm_for_each_node(node, &tdev->hbm_mm) {
		bytes += node->size;
		buffers++;
	}
	mutex_unlock(&tdev->hbm_lock);
	seq_printf(m, "hbm bytes: %llu\nhbm buffers: %llu\njobs alive: %d\n",
		   bytes, buffers, atomic_read(&tdev->jobs_alive));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tpu_debugfs_usage);

/* Any write resets both queues; their jobs in flight run again. */
static ssize_t tpu_debugfs_reset_write(struct file *file, const char __user *buf,
				       size_t len, loff_t *pos)
{
	struct tpu_device *tdev = file->private_data;

	tpu_sched_recover(&tdev->dma_queue, NULL);
	tpu_sched_recover(&tdev->compute_queue, NULL);
	return len;
}

static const struct file_operations tpu_debugfs_reset_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = tpu_debugfs_reset_write,
	.llseek = noop_llseek,
};

void tpu_debugfs_init(struct drm_minor *minor)
{
	struct tpu_device *tdev = to_tpu_device(minor->dev);

	debugfs_create_file("queues", 0444, minor->debugfs_root, tdev,
			    &tpu_debugfs_queues_fops);
	debugfs_create_file("usage", 0444, minor->debugfs_root, tdev,
			    &tpu_debugfs_usage_fops);
	debugfs_create_file("reset_queues", 0200, minor->debugfs_root, tdev,
			    &tpu_debugfs_reset_fops);
}
