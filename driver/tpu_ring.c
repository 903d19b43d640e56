// SPDX-License-Identifier: GPL-2.0-only
/*
 * Device queues: descriptor rings shared with the device, one fence per
 * descriptor, retired from the queue's interrupt.
 */
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/iopoll.h>
#include <linux/slab.h>

#include "tpu_device.h"
#include "tpu_drv.h"
#include "tpu_hw.h"
#include "tpu_ring.h"
#include "../uapi/tpu_hw.h"

#define TPU_RING_RESET_POLL_US		1000
#define TPU_RING_RESET_TIMEOUT_US	5000000

struct tpu_fence {
	struct dma_fence base;
	struct tpu_ring *ring;
};

static const char *tpu_fence_driver_name(struct dma_fence *fence)
{
	return DRIVER_NAME;
}

static const char *tpu_fence_timeline_name(struct dma_fence *fence)
{
	return container_of(fence, struct tpu_fence, base)->ring->name;
}

static const struct dma_fence_ops tpu_fence_ops = {
	.get_driver_name = tpu_fence_driver_name,
	.get_timeline_name = tpu_fence_timeline_name,
};

static void tpu_ring_write_reg(struct tpu_ring *ring, u32 reg, u32 val)
{
	tpu_reg_write(ring->tdev, TPU_REG_Q(ring->queue, reg), val);
}

static int tpu_status_to_errno(u32 status)
{
	switch (status) {
	case TPU_STATUS_OK:
		return 0;
	case TPU_STATUS_DMA_FAULT:
		return -EFAULT;
	case TPU_STATUS_ABORTED:
		return -ECANCELED;
	case TPU_STATUS_JOB_FAILED:
		return -EIO;
	default:
		return -EIO;
	}
}

/*
 * Retire the oldest slot with @err: its retire work, then its fence.
 * drm_sched does not pass a hardware fence's error on to its finished
 * fence, so with @set_job_error set it there too, before the signal runs
 * the scheduler's callback. The work cannot be a fence callback: the
 * fence reads as signalled before its callbacks have run, and the
 * scheduler may then free the job while a callback still uses it.
 */
static void tpu_ring_retire_one(struct tpu_ring *ring, int err,
				bool set_job_error)
{
	u32 slot = ring->head & (ring->size - 1);
	struct dma_fence *fence = ring->fences[slot];
	struct dma_fence *finished = ring->finished[slot];
	struct tpu_ring_retire *retire = ring->retire[slot];

	if (retire) {
		ring->retire[slot] = NULL;
		retire->fn(retire);
	}
	if (err) {
		dma_fence_set_error(fence, err);
		if (set_job_error && finished && !dma_fence_is_signaled(finished))
			dma_fence_set_error(finished, err);
	}
	dma_fence_signal_locked(fence);
	dma_fence_put(fence);
	dma_fence_put(finished);
	ring->fences[slot] = NULL;
	ring->finished[slot] = NULL;
	ring->head++;
	ring->head_since = jiffies;
}

/**
 * tpu_ring_started() - whether the device has started a job, and when
 * @ring: the ring
 * @finished: the job's scheduler fence, as passed to tpu_ring_submit()
 * @since: set to when it started (jiffies), if it has
 *
 * The device runs a queue's descriptors one at a time, in order: the
 * oldest in flight started when the one before it completed (or when it
 * was queued, on an idle ring). A job behind others has not started.
 *
 * Return: true if @finished is the descriptor the device is running.
 */
bool tpu_ring_started(struct tpu_ring *ring, struct dma_fence *finished,
		      unsigned long *since)
{
	unsigned long flags;
	bool running;

	spin_lock_irqsave(&ring->lock, flags);
	running = ring->head != ring->tail &&
		  ring->finished[ring->head & (ring->size - 1)] == finished;
	if (running)
		*since = ring->head_since;
	spin_unlock_irqrestore(&ring->lock, flags);
	return running;
}

/*
 * Signal the fences of every descriptor the device has completed, up to
 * its HEAD register; called with @lock held. Returns how many it retired.
 */
static u32 tpu_ring_retire_completed(struct tpu_ring *ring)
{
	struct tpu_completion *cpl = ring->cpl;
	u32 head, before = ring->head;

	head = tpu_reg_read(ring->tdev, TPU_REG_Q(ring->queue, TPU_Q_HEAD));
	/* Not ours: a HEAD from before a reset, or a broken device. */
	if (head - ring->head > ring->tail - ring->head)
		return 0;
	while (ring->head != head) {
		u32 slot = ring->head & (ring->size - 1);
		int err = tpu_status_to_errno(READ_ONCE(cpl[slot].status));

		if (err)
			tpu_dbg(ring->tdev, "%s: descriptor %llu: status %u detail %u\n",
				ring->name, cpl[slot].id, cpl[slot].status,
				cpl[slot].detail);
		ring->last_busy_ns = READ_ONCE(cpl[slot].busy_ns);
		tpu_ring_retire_one(ring, err, true);
	}
	/*
	 * Retired up to here: the MSI for it, if still to come, is not needed.
	 * No ordering: the device reading it early only skips a message that
	 * this very retirement makes redundant.
	 */
	if (ring->head != before)
		WRITE_ONCE(ring->area->head, ring->head);
	return ring->head - before;
}

static irqreturn_t tpu_ring_irq(int irq, void *arg)
{
	struct tpu_ring *ring = arg;
	unsigned long flags;

	spin_lock_irqsave(&ring->lock, flags);
	ring->irqs++;
	tpu_ring_retire_completed(ring);
	spin_unlock_irqrestore(&ring->lock, flags);
	return IRQ_HANDLED;
}

/**
 * tpu_ring_poll() - retire completed descriptors without the interrupt
 * @ring: the ring
 *
 * For a waiter spinning on a short job: the device writes a descriptor's
 * completion record, with the descriptor's id, before it moves HEAD, so a
 * plain memory read says when the register is worth reading. A stale or
 * torn record costs one register read and retires nothing extra: HEAD
 * decides, under the lock, exactly as in the interrupt handler, and the
 * interrupt that follows finds nothing left to do.
 *
 * Return: true if it retired a descriptor.
 */
bool tpu_ring_poll(struct tpu_ring *ring)
{
	struct tpu_completion *cpl = ring->cpl;
	struct tpu_desc_header *hdr;
	unsigned long flags;
	u32 retired, head = READ_ONCE(ring->head);
	u32 slot = head & (ring->size - 1);

	if (head == READ_ONCE(ring->tail))
		return false;
	hdr = ring->desc + slot * TPU_DESC_SIZE;
	if (READ_ONCE(cpl[slot].id) != READ_ONCE(hdr->id))
		return false;
	spin_lock_irqsave(&ring->lock, flags);
	retired = tpu_ring_retire_completed(ring);
	ring->polled += retired;
	spin_unlock_irqrestore(&ring->lock, flags);
	return retired;
}

/**
 * tpu_ring_poll_begin() - tell the device a waiter polls the ring
 * @ring: the ring
 *
 * While any waiter polls, the device sends no interrupt for the
 * descriptors it completes (the driver area's TPU_DRIVER_NO_IRQ): the
 * pollers retire them, every waiter's alike, and an interrupt would only
 * take the CPU from the one that is about to submit the next job. Pair
 * with tpu_ring_poll_end().
 */
void tpu_ring_poll_begin(struct tpu_ring *ring)
{
	unsigned long flags;

	spin_lock_irqsave(&ring->lock, flags);
	if (!ring->pollers++)
		WRITE_ONCE(ring->area->flags, ring->area_flags | TPU_DRIVER_NO_IRQ);
	spin_unlock_irqrestore(&ring->lock, flags);
}

/**
 * tpu_ring_poll_end() - end tpu_ring_poll_begin()
 * @ring: the ring
 *
 * The last poller turns the interrupt back on, then looks at the ring once
 * more: a descriptor the device completed while the flag was set raises
 * nothing later (the barrier pairs with the device's, uapi/tpu_hw.h).
 */
void tpu_ring_poll_end(struct tpu_ring *ring)
{
	unsigned long flags;
	bool last;

	spin_lock_irqsave(&ring->lock, flags);
	last = !--ring->pollers;
	if (last)
		WRITE_ONCE(ring->area->flags, ring->area_flags);
	spin_unlock_irqrestore(&ring->lock, flags);
	if (last) {
		/* The flag's store before the records' loads: the device's pair */
		smp_mb();
		tpu_ring_poll(ring);
	}
}

/**
 * tpu_ring_submit() - queue one descriptor
 * @ring: the ring
 * @desc: TPU_DESC_SIZE bytes; its id is set here
 * @finished: the scheduler fence to share the descriptor's error, or NULL
 * @retire: work to run when the descriptor retires, or NULL; until then,
 *	or tpu_ring_forget(), it must stay alive
 *
 * The scheduler keeps fewer jobs in flight than the ring has slots, so a
 * full ring is a driver bug.
 *
 * Return: the descriptor's fence (a new reference), or an ERR_PTR.
 */
struct dma_fence *tpu_ring_submit(struct tpu_ring *ring, const void *desc,
				  struct dma_fence *finished,
				  struct tpu_ring_retire *retire)
{
	struct tpu_fence *fence;
	struct tpu_desc_header *hdr;
	unsigned long flags;
	u32 slot;

	fence = kzalloc(sizeof(*fence), GFP_KERNEL);
	if (!fence)
		return ERR_PTR(-ENOMEM);
	fence->ring = ring;

	spin_lock_irqsave(&ring->lock, flags);
	if (WARN_ON(ring->tail - ring->head >= ring->size)) {
		spin_unlock_irqrestore(&ring->lock, flags);
		kfree(fence);
		return ERR_PTR(-EBUSY);
	}
	dma_fence_init(&fence->base, &tpu_fence_ops, &ring->lock,
		       ring->fence_context, ++ring->seqno);
	if (ring->head == ring->tail)
		ring->head_since = jiffies;
	slot = ring->tail & (ring->size - 1);
	hdr = ring->desc + slot * TPU_DESC_SIZE;
	memcpy(hdr, desc, TPU_DESC_SIZE);
	hdr->id = ring->seqno;
	ring->fences[slot] = dma_fence_get(&fence->base);
	ring->finished[slot] = dma_fence_get(finished);
	ring->retire[slot] = retire;
	ring->tail++;
	/* The descriptor must be visible before the doorbell. */
	wmb();
	tpu_ring_write_reg(ring, TPU_Q_TAIL, ring->tail);
	spin_unlock_irqrestore(&ring->lock, flags);
	return &fence->base;
}

/**
 * tpu_ring_forget() - make sure the ring will not run @retire
 * @ring: the ring
 * @retire: work passed to tpu_ring_submit()
 *
 * After a reset that did not finish, descriptors stay on the ring with
 * their work; a job freed or run again meanwhile takes its work back. On
 * return @retire has either run to completion or is no longer on the ring.
 * Only a job whose work has not run needs it: the work marks that itself.
 */
void tpu_ring_forget(struct tpu_ring *ring, struct tpu_ring_retire *retire)
{
	unsigned long flags;
	u32 i;

	spin_lock_irqsave(&ring->lock, flags);
	for (i = ring->head; i != ring->tail; i++)
		if (ring->retire[i & (ring->size - 1)] == retire)
			ring->retire[i & (ring->size - 1)] = NULL;
	spin_unlock_irqrestore(&ring->lock, flags);
}

/**
 * tpu_ring_fail_all() - fail every in-flight descriptor
 * @ring: the ring, whose device queue is stopped (after a reset)
 * @error: the hardware fences' error
 *
 * The jobs' own fences are left alone: the scheduler decides their fate
 * (a rerun, or failure).
 */
void tpu_ring_fail_all(struct tpu_ring *ring, int error)
{
	unsigned long flags;

	spin_lock_irqsave(&ring->lock, flags);
	while (ring->head != ring->tail)
		tpu_ring_retire_one(ring, error, false);
	ring->head = 0;
	ring->tail = 0;
	spin_unlock_irqrestore(&ring->lock, flags);
}

/**
 * tpu_ring_start() - program and enable the device queue
 * @ring: the ring, empty
 *
 * Return: 0, or -EIO if the device refuses the configuration.
 */
int tpu_ring_start(struct tpu_ring *ring)
{
	u32 ctrl = TPU_Q_CTRL_ENABLE, status, minor;
	unsigned long flags;

	/*
	 * A device of ABI 1.0 refuses the bit, and never reads the area; one
	 * of 1.1 ignores TPU_DRIVER_HEAD and @head.
	 */
	minor = TPU_VERSION_MINOR(ring->tdev->hw_version);
	if (minor >= 1)
		ctrl |= TPU_Q_CTRL_DRIVER_AREA;
	spin_lock_irqsave(&ring->lock, flags);
	ring->area_flags = minor >= 2 ? TPU_DRIVER_HEAD : 0;
	WRITE_ONCE(ring->area->head, ring->head);
	WRITE_ONCE(ring->area->flags, ring->area_flags |
		   (ring->pollers ? TPU_DRIVER_NO_IRQ : 0));
	spin_unlock_irqrestore(&ring->lock, flags);

	tpu_ring_write_reg(ring, TPU_Q_CTRL, 0);
	tpu_ring_write_reg(ring, TPU_Q_RING_LO, lower_32_bits(ring->desc_dma));
	tpu_ring_write_reg(ring, TPU_Q_RING_HI, upper_32_bits(ring->desc_dma));
	tpu_ring_write_reg(ring, TPU_Q_CPL_LO, lower_32_bits(ring->cpl_dma));
	tpu_ring_write_reg(ring, TPU_Q_CPL_HI, upper_32_bits(ring->cpl_dma));
	tpu_ring_write_reg(ring, TPU_Q_SIZE, ring->size);
	tpu_ring_write_reg(ring, TPU_Q_CTRL, ctrl);
	status = tpu_reg_read(ring->tdev, TPU_REG_Q(ring->queue, TPU_Q_STATUS));
	if (!(status & TPU_Q_STATUS_ENABLED)) {
		tpu_err(ring->tdev, "%s: device refused the queue (status 0x%x)\n",
			ring->name, status);
		return -EIO;
	}
	return 0;
}

/**
 * tpu_ring_reset() - reset the device queue alone, and start it afresh
 * @ring: the ring; its scheduler is stopped
 *
 * The descriptor the device was running is aborted; every fence still in
 * flight fails with -ECANCELED once the device has stopped it, so nothing
 * of a failed job is written afterwards. Other queues are not disturbed.
 *
 * Return: 0, or -EIO if the queue does not stop or restart.
 */
int tpu_ring_reset(struct tpu_ring *ring)
{
	u32 status;
	int ret;

	tpu_ring_write_reg(ring, TPU_Q_CTRL, TPU_Q_CTRL_RESET);
	/* Asynchronous: the device's worker stops within milliseconds. */
	ret = readl_poll_timeout(ring->tdev->regs +
				 TPU_REG_Q(ring->queue, TPU_Q_STATUS), status,
				 !(status & TPU_Q_STATUS_RESETTING),
				 TPU_RING_RESET_POLL_US, TPU_RING_RESET_TIMEOUT_US);
	if (ret) {
		tpu_err(ring->tdev, "%s: reset did not finish (status 0x%x)\n",
			ring->name, status);
		return -EIO;
	}
	tpu_ring_fail_all(ring, -ECANCELED);
	return tpu_ring_start(ring);
}

/* The completion array and the driver area after it (uapi/tpu_hw.h). */
static size_t tpu_ring_cpl_bytes(u32 size)
{
	return size * TPU_CPL_SIZE + sizeof(struct tpu_driver_area);
}

/**
 * tpu_ring_init() - allocate a ring, hook its interrupt, start the queue
 * @tdev: the device
 * @ring: the ring to set up
 * @queue: TPU_QUEUE_*
 * @size: entries, a power of two no larger than TPU_Q_MAX_SIZE
 *
 * Return: 0 or a negative errno.
 */
int tpu_ring_init(struct tpu_device *tdev, struct tpu_ring *ring,
		  unsigned int queue, u32 size)
{
	struct device *dev = &tdev->pdev->dev;
	int ret;

	ring->tdev = tdev;
	ring->queue = queue;
	ring->size = size;
	spin_lock_init(&ring->lock);
	ring->fence_context = dma_fence_context_alloc(1);
	snprintf(ring->name, sizeof(ring->name), "tpu-q%u", queue);

	ring->fences = kcalloc(size, sizeof(*ring->fences), GFP_KERNEL);
	ring->finished = kcalloc(size, sizeof(*ring->finished), GFP_KERNEL);
	ring->retire = kcalloc(size, sizeof(*ring->retire), GFP_KERNEL);
	if (!ring->fences || !ring->finished || !ring->retire) {
		ret = -ENOMEM;
		goto err_free_fences;
	}
	ring->desc = dma_alloc_coherent(dev, size * TPU_DESC_SIZE,
					&ring->desc_dma, GFP_KERNEL);
	if (!ring->desc) {
		ret = -ENOMEM;
		goto err_free_fences;
	}
	ring->cpl = dma_alloc_coherent(dev, tpu_ring_cpl_bytes(size),
				       &ring->cpl_dma, GFP_KERNEL);
	if (!ring->cpl) {
		ret = -ENOMEM;
		goto err_free_desc;
	}
	ring->area = ring->cpl + size * TPU_CPL_SIZE;

	ring->irq = pci_irq_vector(tdev->pdev, TPU_MSIX_VEC_QUEUE(queue));
	ret = request_irq(ring->irq, tpu_ring_irq, 0, ring->name, ring);
	if (ret) {
		tpu_err(tdev, "%s: cannot request its interrupt: %d\n",
			ring->name, ret);
		goto err_free_cpl;
	}
	ret = tpu_ring_start(ring);
	if (ret)
		goto err_free_irq;
	return 0;

err_free_irq:
	free_irq(ring->irq, ring);
err_free_cpl:
	dma_free_coherent(dev, tpu_ring_cpl_bytes(size), ring->cpl,
			  ring->cpl_dma);
err_free_desc:
	dma_free_coherent(dev, size * TPU_DESC_SIZE, ring->desc, ring->desc_dma);
err_free_fences:
	kfree(ring->retire);
	kfree(ring->finished);
	kfree(ring->fences);
	return ret;
}

/**
 * tpu_ring_fini() - tear down a ring
 * @ring: the ring, whose device queue has been stopped by a reset
 */
void tpu_ring_fini(struct tpu_ring *ring)
{
	struct device *dev = &ring->tdev->pdev->dev;

	free_irq(ring->irq, ring);
	tpu_ring_fail_all(ring, -ENODEV);
	dma_free_coherent(dev, tpu_ring_cpl_bytes(ring->size), ring->cpl,
			  ring->cpl_dma);
	dma_free_coherent(dev, ring->size * TPU_DESC_SIZE, ring->desc,
			  ring->desc_dma);
	kfree(ring->retire);
	kfree(ring->finished);
	kfree(ring->fences);
}
