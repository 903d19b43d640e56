// SPDX-License-Identifier: GPL-2.0-only
/*
 * tpu-mxu registers: identity check, capabilities, reset and interrupts.
 */
#include <linux/interrupt.h>
#include <linux/iopoll.h>

#include "tpu_device.h"
#include "tpu_drv.h"
#include "tpu_hw.h"
#include "../uapi/tpu_hw.h"

/* The device stops a running descriptor within milliseconds. */
#define TPU_RESET_TIMEOUT_US	5000000
#define TPU_RESET_POLL_US	1000
#define TPU_IRQ_TEST_TIMEOUT_MS	1000

static u64 tpu_cap_read(struct tpu_device *tdev, unsigned int index)
{
	u32 lo = tpu_reg_read(tdev, TPU_REG_CAP(index));
	u32 hi = tpu_reg_read(tdev, TPU_REG_CAP(index) + 4);

	return (u64)hi << 32 | lo;
}

/**
 * tpu_hw_reset() - reset the device and wait until it is ready
 * @tdev: the device
 *
 * The device resets asynchronously: the register write returns at once and
 * the wait, for the queues' workers to stop, sleeps here.
 *
 * Return: 0, or -ETIMEDOUT if the device does not come back.
 */
int tpu_hw_reset(struct tpu_device *tdev)
{
	u32 status;
	int ret;

	tpu_reg_write(tdev, TPU_REG_RESET, TPU_RESET_KEY);
	ret = readl_poll_timeout(tdev->regs + TPU_REG_STATUS, status,
				 status & TPU_STATUS_READY, TPU_RESET_POLL_US,
				 TPU_RESET_TIMEOUT_US);
	if (ret)
		tpu_err(tdev, "device not ready after reset (status 0x%x)\n",
			status);
	return ret;
}

/**
 * tpu_hw_init() - check the device's identity and read its capabilities
 * @tdev: the device, with @regs mapped
 *
 * Return: 0, -ENODEV for a device that is not a tpu-mxu, or -EOPNOTSUPP
 * for a register ABI this driver does not speak.
 */
int tpu_hw_init(struct tpu_device *tdev)
{
	u32 magic = tpu_reg_read(tdev, TPU_REG_MAGIC);
	unsigned int i;
	int ret;

	if (magic != TPU_MAGIC) {
		tpu_err(tdev, "bad magic 0x%08x (expected 0x%08x)\n",
			magic, TPU_MAGIC);
		return -ENODEV;
	}
	tdev->hw_version = tpu_reg_read(tdev, TPU_REG_VERSION);
	if (TPU_VERSION_MAJOR(tdev->hw_version) != TPU_ABI_MAJOR) {
		tpu_err(tdev, "register ABI %u.%u, driver speaks %u.x\n",
			TPU_VERSION_MAJOR(tdev->hw_version),
			TPU_VERSION_MINOR(tdev->hw_version), TPU_ABI_MAJOR);
		return -EOPNOTSUPP;
	}

	ret = tpu_hw_reset(tdev);
	if (ret)
		return ret;

	for (i = 0; i < TPU_CAP_COUNT; i++)
		tdev->caps[i] = tpu_cap_read(tdev, i);

	if (tdev->caps[TPU_CAP_HBM_SIZE] >
	    pci_resource_len(tdev->pdev, TPU_BAR_HBM)) {
		tpu_err(tdev, "HBM of %llu bytes exceeds BAR%d (%llu bytes)\n",
			tdev->caps[TPU_CAP_HBM_SIZE], TPU_BAR_HBM,
			(u64)pci_resource_len(tdev->pdev, TPU_BAR_HBM));
		return -ENODEV;
	}
	return 0;
}

static irqreturn_t tpu_irq_test_handler(int irq, void *arg)
{
	struct tpu_device *tdev = arg;

	complete(&tdev->irq_test_done);
	return IRQ_HANDLED;
}

static void tpu_free_irq_vectors(void *pdev)
{
	pci_free_irq_vectors(pdev);
}

/**
 * tpu_hw_irq_init() - set up MSI-X and prove that interrupts arrive
 * @tdev: the device
 *
 * A device whose interrupts never arrive would hang every job later; fail
 * the probe now instead.
 *
 * Return: 0 or a negative errno.
 */
int tpu_hw_irq_init(struct tpu_device *tdev)
{
	struct pci_dev *pdev = tdev->pdev;
	int ret;

	ret = pci_alloc_irq_vectors(pdev, TPU_MSIX_VECTORS, TPU_MSIX_VECTORS,
				    PCI_IRQ_MSIX);
	if (ret < 0) {
		tpu_err(tdev, "cannot allocate %d MSI-X vectors: %d\n",
			TPU_MSIX_VECTORS, ret);
		return ret;
	}
	ret = devm_add_action_or_reset(&pdev->dev, tpu_free_irq_vectors, pdev);
	if (ret)
		return ret;

	init_completion(&tdev->irq_test_done);
	ret = devm_request_irq(&pdev->dev,
			       pci_irq_vector(pdev, TPU_MSIX_VEC_TEST),
			       tpu_irq_test_handler, 0, DRIVER_NAME "-test",
			       tdev);
	if (ret) {
		tpu_err(tdev, "cannot request the test interrupt: %d\n", ret);
		return ret;
	}

	tpu_reg_write(tdev, TPU_REG_IRQ_RAISE, 1);
	if (!wait_for_completion_timeout(&tdev->irq_test_done,
					 msecs_to_jiffies(TPU_IRQ_TEST_TIMEOUT_MS))) {
		tpu_err(tdev, "test interrupt did not arrive within %d ms\n",
			TPU_IRQ_TEST_TIMEOUT_MS);
		return -EIO;
	}
	return 0;
}
