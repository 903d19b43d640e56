// SPDX-License-Identifier: GPL-2.0-only
/*
 * io_uring submission: DRM_TPU_URING_CMD_SUBMIT and DRM_TPU_URING_CMD_COPY
 * through IORING_OP_URING_CMD on the render node. The command queues the
 * job as the ioctl would, returns -EIOCBQUEUED, and completes from the
 * job's finished fence: the fence callback (interrupt context) defers to
 * the submitter's task, which posts the CQE.
 */
#include <linux/dma-fence.h>
#include <linux/io_uring.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>

#include "tpu_device.h"
#include "tpu_dma.h"
#include "tpu_job.h"
#include "tpu_uring.h"
#include "../uapi/tpu_drm.h"

/**
 * struct tpu_uring_pdu - a command in flight, in &io_uring_cmd.pdu
 * @cb: on the job's finished fence until it signals
 * @job_id: the job's id, for the CQE's extra field
 * @status: the job's outcome, read from the fence when it signals
 *
 * Nothing else is needed: the fence is alive while its callbacks run, the
 * command lives until io_uring_cmd_done(), and io_uring holds the file
 * (hence the drm_file and its entities) until then.
 */
struct tpu_uring_pdu {
	struct dma_fence_cb cb;
	u32 job_id;
	int status;
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
	ret = dma_fence_add_callback(done, &pdu->cb, tpu_uring_fence_cb);
	if (ret) {
		/* Already done (or cancelled): complete from task work too. */
		pdu->status = done->error;
		io_uring_cmd_complete_in_task(cmd, tpu_uring_complete);
	}
	dma_fence_put(done);
	return -EIOCBQUEUED;
}
