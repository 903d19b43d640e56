/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * tpu-mxu hardware interface: PCI identity, BAR layout, registers.
 *
 * Shared by the QEMU device (qemu-device/) and the kernel driver (driver/);
 * userspace never sees it. All registers are 32 bits wide, little-endian,
 * and must be accessed with 32-bit loads and stores. 64-bit quantities are
 * split into a low word at the register's offset and a high word at +4; read
 * the low word first.
 */
#ifndef TPU_HW_H
#define TPU_HW_H

#include <linux/types.h>

#include "tpu_params.h"

/*
 * PCI identity. 0x1234 is the vendor ID QEMU itself uses for its emulated
 * teaching and display devices (edu is 1234:11e8); it is not assigned to a
 * real vendor, so it cannot collide with hardware. 0x7470 ("tp") is not used
 * by any QEMU device.
 */
#define TPU_PCI_VENDOR_ID	0x1234
#define TPU_PCI_DEVICE_ID	0x7470
#define TPU_PCI_REVISION	0x01

/* BARs */
#define TPU_BAR_REGS		0	/* registers, TPU_REGS_SIZE bytes */
#define TPU_BAR_HBM		2	/* HBM aperture, 64-bit prefetchable */
#define TPU_BAR_MSIX		4	/* MSI-X table and PBA */
#define TPU_REGS_SIZE		0x1000

/* MSI-X vectors, one per interrupt source */
#define TPU_MSIX_VEC_TEST	0	/* raised by writing TPU_REG_IRQ_RAISE */
#define TPU_MSIX_VEC_QUEUE(q)	(1 + (q))	/* a queue's completions */
#define TPU_MSIX_VECTORS	(1 + TPU_NUM_QUEUES)

/* Identity */
#define TPU_REG_MAGIC		0x000	/* RO: TPU_MAGIC */
#define  TPU_MAGIC		0x4d555054	/* "TPUM" in memory order */
#define TPU_REG_VERSION		0x004	/* RO: register ABI version */
#define  TPU_VERSION_MAJOR(v)	((v) >> 16)
#define  TPU_VERSION_MINOR(v)	((v) & 0xffff)
#define  TPU_ABI_MAJOR		1
#define  TPU_ABI_MINOR		2	/* 1: TPU_Q_CTRL_DRIVER_AREA, 2: TPU_Q_IRQS_HELD */
#define TPU_REG_SCRATCH		0x008	/* RW: no effect; resets to 0 */

/* Control */
#define TPU_REG_RESET		0x00c	/* WO: write TPU_RESET_KEY to reset */
#define  TPU_RESET_KEY		0x52534554	/* "TESR": other values ignored */
#define TPU_REG_STATUS		0x010	/* RO */
#define  TPU_STATUS_READY	(1u << 0)	/* clear while a reset runs */
#define TPU_REG_RESET_COUNT	0x014	/* RO: resets since power-on */

/* Interrupts */
#define TPU_REG_IRQ_RAISE	0x020	/* WO: write 1 to raise TPU_MSIX_VEC_TEST */

/*
 * Capabilities: read-only 64-bit values at TPU_REG_CAP(index), one per
 * device parameter of tpu_params.h (its property's value): TPU_CAP_HBM_SIZE,
 * TPU_CAP_VMEM_SIZE, ... TPU_CAP_LAUNCH_COST_NS.
 */
#define TPU_REG_CAP_BASE	0x100
#define TPU_REG_CAP(index)	(TPU_REG_CAP_BASE + 8 * (index))

enum tpu_cap {
#define TPU_CAP_INDEX(id, field, index, ...) TPU_CAP_##id = (index),
	TPU_PARAMS(TPU_CAP_INDEX)
#undef TPU_CAP_INDEX
	TPU_CAP_COUNT
};

/*
 * Queues: rings of 64-byte descriptors in guest memory, consumed in order
 * by a device worker. For each descriptor the device writes a 32-byte
 * completion record to the same index of the queue's completion array, then
 * advances HEAD and raises the queue's MSI-X vector.
 *
 * HEAD and TAIL are free-running 32-bit counters; slot = index % SIZE. The
 * driver fills slots and writes TAIL (the doorbell); TAIL - HEAD must not
 * exceed SIZE, or the doorbell is refused with TPU_Q_STATUS_BAD_TAIL. RING,
 * CPL and SIZE can only be written while the queue is disabled. Enabling a
 * queue whose worker still runs a descriptor (TPU_Q_STATUS_BUSY, after a
 * disable) is refused with TPU_Q_STATUS_BAD_CONFIG: HEAD and TAIL restart
 * at 0 only once nothing can advance HEAD any more.
 *
 * Resetting a queue (TPU_Q_CTRL_RESET) or the device (every queue) stops it:
 * the descriptor being processed completes with TPU_STATUS_ABORTED (and
 * writes nothing more once the reset has finished), the rest are dropped,
 * the queue's registers return to 0. Other queues go on. A reset is asynchronous: the
 * register write starts it and returns at once; TPU_Q_STATUS_RESETTING (and
 * for a device reset, TPU_STATUS_READY clear) holds until the worker has
 * stopped, and the end of a queue reset raises the queue's vector. Until
 * then the queue ignores writes (a guest error). The device stops a
 * descriptor within about 10 ms of host time.
 */
#define TPU_QUEUE_DMA		0	/* struct tpu_dma_desc */
#define TPU_QUEUE_COMPUTE	1	/* struct tpu_compute_desc */
#define TPU_NUM_QUEUES		2
#define TPU_DESC_SIZE		64
#define TPU_CPL_SIZE		32
#define TPU_Q_MAX_SIZE		4096

#define TPU_REG_QUEUE_BASE	0x200
#define TPU_REG_QUEUE_STRIDE	0x40
#define TPU_REG_Q(q, reg)	(TPU_REG_QUEUE_BASE + (q) * TPU_REG_QUEUE_STRIDE + (reg))
#define  TPU_Q_RING_LO		0x00	/* RW: descriptor ring, 64-byte aligned */
#define  TPU_Q_RING_HI		0x04
#define  TPU_Q_CPL_LO		0x08	/* RW: completion array, 32-byte aligned */
#define  TPU_Q_CPL_HI		0x0c
#define  TPU_Q_SIZE		0x10	/* RW: entries, power of two, 2..MAX */
#define  TPU_Q_CTRL		0x14	/* RW */
#define   TPU_Q_CTRL_ENABLE	(1u << 0)
#define   TPU_Q_CTRL_RESET	(1u << 1)	/* WO: reset this queue alone */
#define   TPU_Q_CTRL_DRIVER_AREA (1u << 2)	/* read struct tpu_driver_area */
#define  TPU_Q_TAIL		0x18	/* RW: producer index (doorbell) */
#define  TPU_Q_HEAD		0x1c	/* RO: consumer index */
#define  TPU_Q_STATUS		0x20	/* RO */
#define   TPU_Q_STATUS_ENABLED	(1u << 0)
#define   TPU_Q_STATUS_BAD_TAIL	(1u << 1)	/* a doorbell was refused */
#define   TPU_Q_STATUS_BAD_CONFIG (1u << 2)	/* enable refused: RING/CPL/SIZE, busy */
#define   TPU_Q_STATUS_BUSY	(1u << 3)	/* the worker runs a descriptor */
#define   TPU_Q_STATUS_RESETTING (1u << 4)	/* a reset has not finished */
#define  TPU_Q_DONE		0x24	/* RO: descriptors completed */
#define  TPU_Q_ERRORS		0x28	/* RO: ...of which with an error */
#define  TPU_Q_IRQS_HELD	0x2c	/* RO: MSIs not sent for TPU_DRIVER_NO_IRQ (1.2) */
#define  TPU_Q_BYTES_LO		0x30	/* RO: bytes moved */
#define  TPU_Q_BYTES_HI		0x34
#define  TPU_Q_BUSY_NS_LO	0x38	/* RO: time spent executing */
#define  TPU_Q_BUSY_NS_HI	0x3c

/* Completion status, in struct tpu_completion.status */
#define TPU_STATUS_OK		0
#define TPU_STATUS_BAD_DESC	1	/* unknown op or non-zero reserved field */
#define TPU_STATUS_BAD_LENGTH	2	/* zero length */
#define TPU_STATUS_HBM_RANGE	3	/* HBM range outside HBM; detail: 0 src, 1 dst */
#define TPU_STATUS_BAD_SG	4	/* SG list malformed; detail: data entry */
#define TPU_STATUS_DMA_FAULT	5	/* guest address not in RAM; detail: entry */
#define TPU_STATUS_ABORTED	6	/* stopped by a reset */
#define TPU_STATUS_JOB_FAILED	7	/* the job's report says why */

/* struct tpu_desc_header - how every queue's descriptors start */
struct tpu_desc_header {
	__u32 op;
	__u32 op_specific;
	__u64 id;		/* echoed in the completion record */
};

/* DMA queue operations */
#define TPU_DMA_OP_H2D		1	/* SG list (guest memory) -> HBM */
#define TPU_DMA_OP_D2H		2	/* HBM -> SG list */
#define TPU_DMA_OP_D2D		3	/* HBM -> HBM (ranges may overlap) */
#define TPU_DMA_OP_FILL		4	/* HBM range := pattern byte */

/*
 * SG lists are chained segments: a segment never crosses a 4 KiB boundary of
 * guest memory, and the entry after a segment's last data entry is a link
 * (len == TPU_SG_LINK) to the next segment. sg_count counts data entries only.
 */
#define TPU_DMA_MAX_SG		(1u << 24)
#define TPU_SG_SEGMENT_SIZE	4096
#define TPU_SG_LINK		(1ull << 63)

/* struct tpu_dma_desc - one DMA queue descriptor (64 bytes) */
struct tpu_dma_desc {
	__u32 op;		/* TPU_DMA_OP_* */
	__u32 sg_count;		/* H2D/D2H: entries at sg_addr; else 0 */
	__u64 id;		/* echoed in the completion record */
	__u64 hbm_offset;	/* H2D dst, D2H src, D2D src, FILL dst */
	__u64 hbm_offset2;	/* D2D dst; else 0 */
	__u64 length;		/* bytes; equals the SG list's total */
	__u64 sg_addr;		/* guest-physical, 16-byte aligned */
	__u64 pattern;		/* FILL: the low byte; else 0 */
	__u64 reserved;		/* must be 0 */
};

/* struct tpu_sg_entry - a guest-physical range, or a link */
struct tpu_sg_entry {
	__u64 addr;		/* 16-byte aligned for a link */
	__u64 len;		/* non-zero; TPU_SG_LINK for a link */
};

/* struct tpu_completion - written by the device per descriptor (32 bytes) */
struct tpu_completion {
	__u64 id;		/* the descriptor's id */
	__u32 status;		/* TPU_STATUS_* */
	__u32 detail;		/* status-specific, see TPU_STATUS_* */
	__u64 bytes;		/* bytes moved */
	__u64 busy_ns;		/* device time spent on this descriptor */
};

/**
 * struct tpu_driver_area - the driver's word to a queue (32 bytes, ABI 1.1)
 * @flags: TPU_DRIVER_*
 * @head: with TPU_DRIVER_HEAD (ABI 1.2), how far the driver has retired
 *	(a free-running count, as HEAD)
 * @reserved: ignored
 *
 * In guest memory right after the completion array (at CPL + SIZE *
 * TPU_CPL_SIZE), read by the device only when the queue was enabled with
 * TPU_Q_CTRL_DRIVER_AREA. Each time it advances HEAD, the device reads
 * @flags after the new HEAD is visible: while TPU_DRIVER_NO_IRQ is set it
 * sends no MSI-X message for that advance (as virtio's
 * VRING_AVAIL_F_NO_INTERRUPT), so a driver that polls the completion
 * records is not interrupted for what it retires itself. A driver that
 * clears the flag must then, after a full barrier, read the completion
 * records once more: an advance the device saw the flag set for raises
 * nothing later.
 *
 * With TPU_DRIVER_HEAD set, the device reads the area again just before it
 * sends a queue's MSI-X message, and sends none if @head has reached HEAD
 * (as virtio's used_event): a driver that polled and retired everything
 * since the advance would only be interrupted for nothing. @head must only
 * count descriptors the driver has retired, and restart at 0 with HEAD
 * (before the queue is enabled again). The end of a reset always raises
 * its MSI. An area the device cannot read counts as flags 0. TPU_Q_IRQS_HELD
 * counts the messages either flag held back.
 */
struct tpu_driver_area {
	__u32 flags;
	__u32 head;
	__u32 reserved[6];
};

#define TPU_DRIVER_NO_IRQ	(1u << 0)
#define TPU_DRIVER_HEAD		(1u << 1)	/* ABI 1.2: @head is valid */

/* Compute queue operations */
#define TPU_COMPUTE_OP_RUN	1	/* run a grid job (uapi/tpu_job.h) */

/*
 * struct tpu_compute_desc - one compute queue descriptor (64 bytes)
 *
 * The job descriptor and the buffer table are read from guest memory when
 * the job starts; the device writes a struct tpu_job_report to report_addr
 * before the completion record.
 */
struct tpu_compute_desc {
	__u32 op;		/* TPU_COMPUTE_OP_RUN */
	__u32 job_size;		/* bytes at job_addr */
	__u64 id;		/* echoed in the completion record */
	__u64 job_addr;		/* guest-physical, the job descriptor */
	__u64 slots_addr;	/* guest-physical, struct tpu_hw_slot[slot_count] */
	__u32 slot_count;
	__u32 reserved0;	/* must be 0 */
	__u64 report_addr;	/* guest-physical, struct tpu_job_report */
	__u64 reserved[2];	/* must be 0 */
};

/* struct tpu_hw_slot - one buffer-table entry: an HBM range */
struct tpu_hw_slot {
	__u64 hbm_offset;
	__u64 size;
};

#endif /* TPU_HW_H */
