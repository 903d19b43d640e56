// SPDX-License-Identifier: GPL-2.0-only
/*
 * io_uring submission: DRM_TPU_URING_CMD_SUBMIT and DRM_TPU_URING_CMD_COPY
 * through IORING_OP_URING_CMD on the render node. The command queues the
 * job as the ioctl would, returns -EIOCBQUEUED, and completes from the
 * job's finished fence: the fence callback (interrupt context) defers to
 * the submitter's task, which posts the CQE. On a ring made with
 * IORING_SETUP_IOPOLL the waiter polls the device queue instead, as NVMe
 * passthrough does: no interrupt or wake-up between the device and the CQE.
 */
#include <linux/dma-fence.h>
#include <linux/io_uring.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>

#include "tpu_device.h"
#include "tpu_dma.h"
#include "tpu_job.h"
#include "tpu_ring.h"
#include "tpu_uring.h"
#include "../uapi/tpu_drm.h"

/**
 * struct tpu_uring_pdu - a command in flight, in &io_uring_cmd.pdu
 * @cb: on the job's finished fence until it signals
 * @job_id: the job's id, for the CQE's extra field
 * @status: the job's outcome, read from the fence when it signals (an
 *	errno, down to -MAX_ERRNO: 16 bits, so that @iopoll still fits)
 * @iopoll: the ring polls (IO_URING_F_IOPOLL): complete in place
 *
 * Nothing else is needed: the fence is alive while its callbacks run, the
 * command lives until io_uring_cmd_done(), and io_uring holds the file
 * (hence the drm_file and its entities) until then.
 */
struct tpu_uring_pdu {
	struct dma_fence_cb cb;
	u32 job_id;
	s16 status;
	bool iopoll;
};

static struct tpu_uring_pdu *tpu_uring_pdu(struct io_uring_cmd *cmd)
{
	BUILD_BUG_ON(sizeof(struct tpu_uring_pdu) > sizeof(cmd->pdu));
	return (struct tpu_uring_pdu *)cmd->pdu;
}

/* In the submitter's task: post the CQE. */
static void tpu_uring_complete(struct io_uring_cmd *cmd, unsigned int issue_flags)
{
	struct tpu_uring_pdu *pdu = tpu_uring_pdu(cmd);

	io_uring_cmd_done(cmd, pdu->status, pdu->job_id, issue_flags);
}

/* The job's finished fence signalled, perhaps in interrupt context. */
static void tpu_uring_fence_cb(struct dma_fence *fence, struct dma_fence_cb *cb)
{
	struct tpu_uring_pdu *pdu = container_of(cb, struct tpu_uring_pdu, cb);
	struct io_uring_cmd *cmd = container_of((void *)pdu, struct io_uring_cmd,
						pdu);

	pdu->status = fence->error;
	/*
	 * A polled ring's completion only marks the request done, in any
	 * context; the poller posts the CQE. Task work would also overwrite
	 * &io_uring_cmd.cookie, which a polled ring owns.
	 */
	if (pdu->iopoll)
		io_uring_cmd_done(cmd, pdu->status, pdu->job_id, 0);
	else
		io_uring_cmd_complete_in_task(cmd, tpu_uring_complete);
}

/* Queue the command's copy or job; its finished fence or an ERR_PTR. */
static struct dma_fence *tpu_uring_queue(struct tpu_device *tdev,
					 struct drm_file *file,
					 struct io_uring_cmd *cmd, u32 *job_id)
{
	union {
		struct drm_tpu_submit submit;
		struct drm_tpu_copy copy;
		u8 bytes[DRM_TPU_URING_CMD_PAYLOAD];
	} args;
	struct dma_fence *done;
	size_t size;

	BUILD_BUG_ON(sizeof(args) != DRM_TPU_URING_CMD_PAYLOAD);
	switch (cmd->cmd_op) {
	case DRM_TPU_URING_CMD_SUBMIT:
		size = sizeof(args.submit);
		break;
	case DRM_TPU_URING_CMD_COPY:
		size = sizeof(args.copy);
		break;
	default:
		tpu_dbg(tdev, "unknown cmd_op %#x\n", cmd->cmd_op);
		return ERR_PTR(-EINVAL);
	}

	/* The SQE is shared with userspace: read it once, check the copy. */
	memcpy(&args, cmd->cmd, sizeof(args));
	if (memchr_inv(args.bytes + size, 0, sizeof(args) - size)) {
		tpu_dbg(tdev, "non-zero payload after the argument struct\n");
		return ERR_PTR(-EINVAL);
	}

	if (cmd->cmd_op == DRM_TPU_URING_CMD_COPY) {
		if (args.copy.flags & DRM_TPU_COPY_WAIT) {
			tpu_dbg(tdev, "DRM_TPU_COPY_WAIT: the CQE is the wait\n");
			return ERR_PTR(-EINVAL);
		}
		return tpu_copy_submit(file, &args.copy);
	}
	done = tpu_job_submit(file, &args.submit);
	if (!IS_ERR(done))
		*job_id = args.submit.job_id;
	return done;
}

/**
 * tpu_uring_cmd() - &file_operations.uring_cmd of the render node
 * @cmd: the command; its payload is the ioctl's argument struct
 * @issue_flags: IO_URING_F_* flags of the issue
 *
 * drm_ioctl() is bypassed, so its rules are applied here: a live device,
 * and a render client or an authenticated primary client (every ioctl
 * behind these commands is DRM_RENDER_ALLOW).
 *
 * The command is queued inline even under IO_URING_F_NONBLOCK, as NVMe
 * passthrough does: it may sleep briefly (allocations, the descriptor's
 * copy, pinning a copy's pages), never on the device. -EAGAIN would send
 * every command through io-wq and defeat batching.
 *
 * Return: -EIOCBQUEUED when the command was queued (its CQE comes later),
 * else the error the CQE carries.
 */
int tpu_uring_cmd(struct io_uring_cmd *cmd, unsigned int issue_flags)
{
	struct drm_file *file = cmd->file->private_data;
	struct drm_device *drm = file->minor->dev;
	struct tpu_device *tdev = to_tpu_device(drm);
	struct tpu_uring_pdu *pdu = tpu_uring_pdu(cmd);
	struct dma_fence *done;
	u32 job_id = 0;
	int idx, ret;

	if (!(issue_flags & IO_URING_F_SQE128)) {
		tpu_dbg(tdev, "the ring needs IORING_SETUP_SQE128 (80-byte payload)\n");
		return -EINVAL;
	}
	if (!drm_is_render_client(file) && !file->authenticated)
		return -EACCES;
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;

	done = tpu_uring_queue(tdev, file, cmd, &job_id);
	drm_dev_exit(idx);
	if (IS_ERR(done))
		return PTR_ERR(done);

	pdu->job_id = job_id;
	pdu->iopoll = issue_flags & IO_URING_F_IOPOLL;
	ret = dma_fence_add_callback(done, &pdu->cb, tpu_uring_fence_cb);
	if (ret)
		/* Already done (or cancelled): as if it signalled now. */
		tpu_uring_fence_cb(done, &pdu->cb);
	dma_fence_put(done);
	return -EIOCBQUEUED;
}

/**
 * tpu_uring_cmd_iopoll() - &file_operations.uring_cmd_iopoll of the render node
 * @cmd: a command queued on a ring made with IORING_SETUP_IOPOLL
 * @iob: unused: completions are not batched through the block layer
 * @poll_flags: unused: one look at the queue never blocks
 *
 * Retires what the device has completed on the command's queue, as an
 * interrupt would (the completions of every waiter's commands alike). A
 * command still waiting for its dependencies, or behind others, is found
 * on a later call; io_uring keeps calling while its waiter wants events.
 *
 * Return: 1 if a descriptor was retired, else 0.
 */
int tpu_uring_cmd_iopoll(struct io_uring_cmd *cmd, struct io_comp_batch *iob,
			 unsigned int poll_flags)
{
	struct drm_file *file = cmd->file->private_data;
	struct drm_device *drm = file->minor->dev;
	struct tpu_device *tdev = to_tpu_device(drm);
	struct tpu_queue *queue = cmd->cmd_op == DRM_TPU_URING_CMD_COPY ?
				  &tdev->dma_queue : &tdev->compute_queue;
	int idx, found;

	/* Removal fails what is in flight: its fences complete the rest. */
	if (!drm_dev_enter(drm, &idx))
		return 0;
	found = tpu_ring_poll(&queue->ring);
	drm_dev_exit(idx);
	return found;
}
