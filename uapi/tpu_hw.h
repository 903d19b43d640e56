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
#define TPU_MSIX_VECTORS	1

/* Identity */
#define TPU_REG_MAGIC		0x000	/* RO: TPU_MAGIC */
#define  TPU_MAGIC		0x4d555054	/* "TPUM" in memory order */
#define TPU_REG_VERSION		0x004	/* RO: register ABI version */
#define  TPU_VERSION_MAJOR(v)	((v) >> 16)
#define  TPU_VERSION_MINOR(v)	((v) & 0xffff)
#define  TPU_ABI_MAJOR		1
#define  TPU_ABI_MINOR		0
#define TPU_REG_SCRATCH		0x008	/* RW: no effect; resets to 0 */

/* Control */
#define TPU_REG_RESET		0x00c	/* WO: write TPU_RESET_KEY to reset */
#define  TPU_RESET_KEY		0x52534554	/* "TESR": other values ignored */
#define TPU_REG_STATUS		0x010	/* RO */
#define  TPU_STATUS_READY	(1u << 0)
#define TPU_REG_RESET_COUNT	0x014	/* RO: resets since power-on */

/* Interrupts */
#define TPU_REG_IRQ_RAISE	0x020	/* WO: write 1 to raise TPU_MSIX_VEC_TEST */

/*
 * Capabilities: read-only 64-bit values at TPU_REG_CAP(index). Sizes are in
 * bytes, rates per second, costs in nanoseconds. The rates and costs are the
 * parameters of the device's timing model (a v5e-like chip by default).
 */
#define TPU_REG_CAP_BASE	0x100
#define TPU_REG_CAP(index)	(TPU_REG_CAP_BASE + 8 * (index))
#define TPU_CAP_HBM_SIZE		0	/* HBM bytes (BAR2 size) */
#define TPU_CAP_VMEM_SIZE		1	/* physical VMEM bytes */
#define TPU_CAP_VMEM_LIMIT		2	/* default scoped VMEM limit */
#define TPU_CAP_SMEM_SIZE		3	/* SMEM bytes */
#define TPU_CAP_CORES			4	/* TensorCores */
#define TPU_CAP_MXU_DIM			5	/* MXU is MXU_DIM x MXU_DIM */
#define TPU_CAP_MXU_COUNT		6	/* MXUs per core */
#define TPU_CAP_PEAK_FLOPS_BF16		7	/* FLOP/s, bf16 inputs */
#define TPU_CAP_PEAK_FLOPS_F32		8	/* FLOP/s, f32 inputs */
#define TPU_CAP_PEAK_OPS_INT8		9	/* OP/s, int8 inputs */
#define TPU_CAP_HBM_BANDWIDTH		10	/* HBM bytes/s */
#define TPU_CAP_STEP_COST_NS		11	/* fixed cost per grid step */
#define TPU_CAP_LAUNCH_COST_NS		12	/* fixed cost per job */
#define TPU_CAP_COUNT			13

#endif /* TPU_HW_H */
