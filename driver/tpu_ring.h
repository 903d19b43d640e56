/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __TPU_RING_H__
#define __TPU_RING_H__

#include <linux/dma-fence.h>
#include <linux/spinlock.h>
#include <linux/types.h>

struct tpu_device;

/**
 * struct tpu_ring_retire - work for when a descriptor leaves the device
 * @fn: called once the device is done with the descriptor (completed, or
 *	stopped by a reset), from the ring's interrupt or reset with the
 *	ring's lock held, before the descriptor's fence signals: whoever
 *	sees the fence signalled sees @fn's work done
 */
struct tpu_ring_retire {
	void (*fn)(struct tpu_ring_retire *retire);
};

/**
 * struct tpu_ring - the driver's side of one device queue
 * @tdev: the device
 * @queue: TPU_QUEUE_*
 * @size: entries (a power of two)
 * @desc: descriptor slots, @size * TPU_DESC_SIZE bytes, device-visible
 * @desc_dma: their bus address
 * @cpl: completion records written by the device
 * @cpl_dma: their bus address
 * @area: the driver's word to the device, right after @cpl
 * @fences: the fence of each in-flight slot
 * @finished: per slot, the scheduler fence that shares its slot's error
 * @retire: per slot, the work to run when it retires, or NULL
 * @tail: next index to fill (free-running, as TPU_Q_TAIL)
 * @head: next index to retire (free-running, as TPU_Q_HEAD)
 * @head_since: when the descriptor at @head reached the device's front
 *	(jiffies): the previous one completed, or it came to an empty ring
 * @polled: descriptors retired by tpu_ring_poll() rather than the interrupt
 * @pollers: waiters between tpu_ring_poll_begin() and tpu_ring_poll_end()
 * @area_flags: the driver area's flags when no waiter polls
 * @irqs: interrupts taken
 * @last_busy_ns: the device's time for the last descriptor retired
 * @lock: protects the indices and @fences; also the fences' lock
 * @fence_context: dma_fence context of this ring
 * @seqno: last fence sequence number
 * @irq: the queue's interrupt
 * @name: timeline name
 */
struct tpu_ring {
	struct tpu_device *tdev;
	unsigned int queue;
	u32 size;
	void *desc;
	dma_addr_t desc_dma;
	void *cpl;
	dma_addr_t cpl_dma;
	struct tpu_driver_area *area;
	struct dma_fence **fences;
	struct dma_fence **finished;
	struct tpu_ring_retire **retire;
	u32 tail;
	u32 head;
	unsigned long head_since;
	u32 polled;
	u32 pollers;
	u32 area_flags;
	u32 irqs;
	u64 last_busy_ns;
	spinlock_t lock; /* indices, fences[] and the fences themselves */
	u64 fence_context;
	u64 seqno;
	int irq;
	char name[16];
};

int tpu_ring_init(struct tpu_device *tdev, struct tpu_ring *ring,
		  unsigned int queue, u32 size);
void tpu_ring_fini(struct tpu_ring *ring);
int tpu_ring_start(struct tpu_ring *ring);
struct dma_fence *tpu_ring_submit(struct tpu_ring *ring, const void *desc,
				  struct dma_fence *finished,
				  struct tpu_ring_retire *retire);
void tpu_ring_forget(struct tpu_ring *ring, struct tpu_ring_retire *retire);
void tpu_ring_fail_all(struct tpu_ring *ring, int error);
bool tpu_ring_poll(struct tpu_ring *ring);
void tpu_ring_poll_begin(struct tpu_ring *ring);
void tpu_ring_poll_end(struct tpu_ring *ring);
bool tpu_ring_started(struct tpu_ring *ring, struct dma_fence *finished,
		      unsigned long *since);
int tpu_ring_reset(struct tpu_ring *ring);

#endif /* __TPU_RING_H__ */
