/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * tpu DRM driver userspace interface.
 *
 * The driver exposes the emulated tpu-mxu accelerator as a DRM render node
 * (/dev/dri/renderD*, driver name "tpu").
 */
#ifndef TPU_DRM_H
#define TPU_DRM_H

#include "drm.h"
#include "tpu_params.h"

#if defined(__cplusplus)
extern "C" {
#endif

#define DRM_TPU_GET_PARAM		0x00
#define DRM_TPU_BO_CREATE		0x01
#define DRM_TPU_BO_INFO			0x02
#define DRM_TPU_COPY			0x03
#define DRM_TPU_SUBMIT			0x04
#define DRM_TPU_JOB_INFO		0x05

#define DRM_IOCTL_TPU_GET_PARAM \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TPU_GET_PARAM, struct drm_tpu_get_param)
#define DRM_IOCTL_TPU_BO_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TPU_BO_CREATE, struct drm_tpu_bo_create)
#define DRM_IOCTL_TPU_BO_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TPU_BO_INFO, struct drm_tpu_bo_info)
#define DRM_IOCTL_TPU_COPY \
	DRM_IOW(DRM_COMMAND_BASE + DRM_TPU_COPY, struct drm_tpu_copy)
#define DRM_IOCTL_TPU_SUBMIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TPU_SUBMIT, struct drm_tpu_submit)
#define DRM_IOCTL_TPU_JOB_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TPU_JOB_INFO, struct drm_tpu_job_info)

/*
 * Parameters for DRM_IOCTL_TPU_GET_PARAM. DRM_TPU_PARAM_OF_CAP(index) is the
 * device parameter of that index in tpu_params.h (DRM_TPU_PARAM_HBM_SIZE,
 * DRM_TPU_PARAM_VMEM_SIZE, ... DRM_TPU_PARAM_LAUNCH_COST_NS): sizes in bytes,
 * rates per second, costs in nanoseconds. The rates and costs parameterise
 * the device's timing model of a TPU-like chip; they say nothing about the
 * host's speed. Capability indexes 0-12 are parameters 1-13; the queue
 * statistics took 14-20, so indexes from 13 on are parameters 21 and up.
 */
#define DRM_TPU_PARAM_OF_CAP(index)	((index) < 13 ? (index) + 1 : (index) + 8)

enum drm_tpu_param {
	DRM_TPU_PARAM_HW_VERSION = 0,		/* major << 16 | minor */
#define DRM_TPU_PARAM_INDEX(id, field, index, ...) \
	DRM_TPU_PARAM_##id = DRM_TPU_PARAM_OF_CAP(index),
	TPU_PARAMS(DRM_TPU_PARAM_INDEX)
#undef DRM_TPU_PARAM_INDEX
	/* Queue statistics, counted by the device since the queue's last reset */
	DRM_TPU_PARAM_DMA_DESCRIPTORS = 14,	/* copies completed */
	DRM_TPU_PARAM_DMA_ERRORS = 15,		/* ...of which failed */
	DRM_TPU_PARAM_DMA_BYTES = 16,		/* bytes moved */
	DRM_TPU_PARAM_DMA_BUSY_NS = 17,		/* device time spent copying */
	DRM_TPU_PARAM_COMPUTE_JOBS = 18,	/* grid jobs completed */
	DRM_TPU_PARAM_COMPUTE_ERRORS = 19,	/* ...of which failed */
	DRM_TPU_PARAM_COMPUTE_BUSY_NS = 20,	/* device time spent on jobs */
	DRM_TPU_PARAM_COUNT = DRM_TPU_PARAM_OF_CAP(TPU_PARAMS_COUNT)
};

/**
 * struct drm_tpu_get_param - query a device parameter
 *
 * Returns -EINVAL for an unknown @param or a non-zero @pad.
 */
struct drm_tpu_get_param {
	/** @param: in, one of DRM_TPU_PARAM_*. */
	__u32 param;
	/** @pad: must be zero. */
	__u32 pad;
	/** @value: out, the parameter's value. */
	__u64 value;
};

/**
 * struct drm_tpu_bo_create - allocate a buffer in the device's HBM
 *
 * The buffer is zeroed before the call returns. Free it with
 * DRM_IOCTL_GEM_CLOSE; its HBM stays allocated until no job or copy uses it.
 * Returns -EINVAL for a zero @size or non-zero @flags, -ENOSPC when HBM has
 * no free range that large.
 */
struct drm_tpu_bo_create {
	/** @size: in, bytes; rounded up to the page size. */
	__u64 size;
	/** @flags: in, must be zero. */
	__u32 flags;
	/** @handle: out, the new buffer's handle in this file. */
	__u32 handle;
};

/**
 * struct drm_tpu_bo_info - describe a buffer
 *
 * Returns -ENOENT if @handle names no buffer of this file.
 */
struct drm_tpu_bo_info {
	/** @handle: in. */
	__u32 handle;
	/** @pad: must be zero. */
	__u32 pad;
	/** @size: out, bytes (a multiple of the page size). */
	__u64 size;
	/** @hbm_offset: out, where the buffer starts in HBM. */
	__u64 hbm_offset;
	/** @mmap_offset: out, the offset to mmap() the buffer at on this file. */
	__u64 mmap_offset;
};

/*
 * Per-file limits. Work queued or running on the device (not yet
 * completed and freed) and job records not yet released are bounded per
 * open file, so one process cannot hold unbounded kernel memory; all of it
 * is freed when the file is closed, also by a killed process.
 * DRM_TPU_MAX_QUEUED_JOBS grid jobs, DRM_TPU_MAX_QUEUED_COPIES copies and
 * DRM_TPU_MAX_QUEUED_DESC_BYTES of job descriptors (with their buffer
 * tables) may be in flight: beyond them SUBMIT and COPY fail with -EAGAIN
 * (wait for some to complete, then submit again). At most
 * DRM_TPU_MAX_JOB_RECORDS records may be kept for JOB_INFO: beyond that
 * SUBMIT without DRM_TPU_SUBMIT_NO_RECORD fails with -ENOSPC until some
 * are released (DRM_TPU_JOB_INFO_RELEASE).
 */
#define DRM_TPU_MAX_QUEUED_JOBS		1024
#define DRM_TPU_MAX_QUEUED_COPIES	1024
#define DRM_TPU_MAX_QUEUED_DESC_BYTES	(64u << 20)
#define DRM_TPU_MAX_JOB_RECORDS		8192

/* Operations of struct drm_tpu_copy */
#define DRM_TPU_COPY_TO_BO	1	/* user memory -> buffer */
#define DRM_TPU_COPY_FROM_BO	2	/* buffer -> user memory */
#define DRM_TPU_COPY_BO_TO_BO	3	/* buffer -> buffer (may be the same one) */

/* Flags of struct drm_tpu_copy */
/*
 * DRM_TPU_COPY_WAIT: return when the copy is done, with its error. The copy
 * is queued once; the wait is ended only by a fatal signal (other signals
 * neither interrupt nor restart it, so a copy never runs twice) and is
 * bounded by the DMA queue's time limit.
 */
#define DRM_TPU_COPY_WAIT	(1u << 0)

/**
 * struct drm_tpu_copy - copy bytes into, out of or between buffers
 *
 * The copy runs on the device's DMA queue after @in_syncobj's fence (if
 * any) has signalled, and signals @out_syncobj (if any) when done. Any
 * alignment and any length up to the buffer's end are allowed. The user
 * pages stay pinned, and the buffers alive, until the copy completes, even
 * if the caller closes them or exits. The pages are mapped for the device
 * only while the device runs the copy, and given back to the CPU before
 * @out_syncobj (or the wait) signals. Two FROM_BO copies in flight at
 * once into user ranges that share a cache line are outside the DMA API's
 * rules: on a host without coherent DMA the bytes of that line are then
 * undefined.
 *
 * Returns -EINVAL for a bad @op, @flags or @pad, a zero @length, or a
 * range outside a buffer; -ENOENT for an unknown handle or syncobj;
 * -EFAULT for user memory that cannot be pinned; -EAGAIN when the file has
 * DRM_TPU_MAX_QUEUED_COPIES copies in flight. With DRM_TPU_COPY_WAIT, also
 * the copy's own error (-EIO if the device refused it).
 */
struct drm_tpu_copy {
	/** @op: in, DRM_TPU_COPY_TO_BO, _FROM_BO or _BO_TO_BO. */
	__u32 op;
	/** @flags: in, DRM_TPU_COPY_* flags. */
	__u32 flags;
	/** @handle: in, the buffer written (TO_BO, BO_TO_BO) or read (FROM_BO). */
	__u32 handle;
	/** @src_handle: in, BO_TO_BO: the buffer read; otherwise 0. */
	__u32 src_handle;
	/** @offset: in, byte offset in @handle. */
	__u64 offset;
	/** @src_offset: in, BO_TO_BO: byte offset in @src_handle; otherwise 0. */
	__u64 src_offset;
	/** @user_ptr: in, TO_BO and FROM_BO: user memory; otherwise 0. */
	__u64 user_ptr;
	/** @length: in, bytes, non-zero. */
	__u64 length;
	/** @in_syncobj: in, syncobj to wait for first, or 0. */
	__u32 in_syncobj;
	/** @out_syncobj: in, syncobj to signal when done, or 0. */
	__u32 out_syncobj;
};

/* Flags of struct drm_tpu_submit */
#define DRM_TPU_SUBMIT_NO_RECORD	(1u << 0)	/* keep no JOB_INFO record */

/**
 * struct drm_tpu_submit - run a grid job (uapi/tpu_job.h) on the device
 *
 * The driver copies the descriptor, checks its structure (sizes, counts,
 * dtypes, slots, programs, VMEM need against the device's limit) and fills
 * the job's buffer table from @handles_ptr: slot i is the buffer
 * handles[i] of this file. The buffers stay alive until the job completes.
 * The job runs after every @in_syncobjs_ptr fence has signalled, and
 * signals @out_syncobj when done; its outcome is kept for
 * DRM_IOCTL_TPU_JOB_INFO under @job_id.
 *
 * Returns -EINVAL for a malformed descriptor or argument, -E2BIG for a
 * descriptor over TPU_JOB_MAX_SIZE, -ENOENT for an unknown handle or
 * syncobj, -ENOSPC when the job's VMEM need exceeds the device's VMEM or
 * the file keeps DRM_TPU_MAX_JOB_RECORDS unreleased records, -EAGAIN when
 * the file has DRM_TPU_MAX_QUEUED_JOBS jobs or DRM_TPU_MAX_QUEUED_DESC_BYTES
 * of descriptors in flight.
 */
struct drm_tpu_submit {
	/** @desc_ptr: in, user pointer to the job descriptor. */
	__u64 desc_ptr;
	/** @desc_size: in, its size in bytes. */
	__u32 desc_size;
	/**
	 * @flags: in, DRM_TPU_SUBMIT_* flags. With DRM_TPU_SUBMIT_NO_RECORD
	 * the driver keeps no record for DRM_IOCTL_TPU_JOB_INFO and @job_id
	 * is 0: the job's status is its fence's (the CQE of
	 * DRM_TPU_URING_CMD_SUBMIT, or @out_syncobj's), the device's report
	 * is not kept. Meant for high job rates, where records would pile up
	 * until released.
	 */
	__u32 flags;
	/** @handles_ptr: in, user pointer to __u32 buffer handles, slot order. */
	__u64 handles_ptr;
	/** @handle_count: in, entries at @handles_ptr. */
	__u32 handle_count;
	/** @in_syncobj_count: in, entries at @in_syncobjs_ptr. */
	__u32 in_syncobj_count;
	/** @in_syncobjs_ptr: in, user pointer to __u32 syncobj handles. */
	__u64 in_syncobjs_ptr;
	/** @out_syncobj: in, syncobj to signal when the job is done, or 0. */
	__u32 out_syncobj;
	/**
	 * @timeout_ms: in, the job's run-time limit from when the device
	 * starts it: 0 for the default (10 s), at most 120000.
	 */
	__u32 timeout_ms;
	/**
	 * @job_id: out, the job's id in this file, for JOB_INFO (never 0),
	 * or 0 with DRM_TPU_SUBMIT_NO_RECORD.
	 */
	__u64 job_id;
};

/* Flags of struct drm_tpu_job_info */
#define DRM_TPU_JOB_INFO_WAIT		(1u << 0)	/* wait until done */
#define DRM_TPU_JOB_INFO_RELEASE	(1u << 1)	/* forget it afterwards */

/**
 * struct drm_tpu_job_info - a submitted job's status and report
 *
 * Returns -ENOENT for an unknown (or released) @job_id, -EINVAL for bad
 * @flags or @pad, -EINTR/-ERESTARTSYS if a wait is interrupted. A job's
 * record lives until it is released or the file is closed.
 */
struct drm_tpu_job_info {
	/** @job_id: in, from DRM_IOCTL_TPU_SUBMIT. */
	__u64 job_id;
	/** @report_ptr: in, user pointer to a struct tpu_job_report, or 0. */
	__u64 report_ptr;
	/** @report_size: in, bytes at @report_ptr (copies the common prefix). */
	__u32 report_size;
	/** @flags: in, DRM_TPU_JOB_INFO_* flags. */
	__u32 flags;
	/**
	 * @status: out, 0 done, -EINPROGRESS not yet, -EIO the job failed
	 * (the report says why), -ETIMEDOUT it ran past its limit,
	 * -ECANCELED a dependency failed or a reset cancelled it.
	 */
	__s32 status;
	/** @pad: must be zero. */
	__u32 pad;
};

/*
 * io_uring commands (IORING_OP_URING_CMD on the render node's file).
 *
 * The ring must be set up with IORING_SETUP_SQE128: the command's payload,
 * sqe->cmd (80 bytes), holds the ioctl's argument struct inline, at offset
 * 0, and the rest of the 80 bytes must be zero. The driver reads the payload
 * once, while the SQE is issued, and applies the ioctl's checks and the
 * render-node permission rules; anything the struct points to (descriptor,
 * handle arrays, syncobj lists) is read then too and may be reused as soon
 * as io_uring_enter() returns. The user memory of a copy must stay mapped
 * until the copy's CQE arrives. Syncobjs are looked up at issue time, so
 * an SQE may wait for the out_syncobj of an SQE issued before it (SQEs of
 * one submission are issued in order unless IOSQE_ASYNC is set).
 *
 * Each command completes with one CQE:
 *  - res: 0 when the copy or job completed successfully; its error when
 *    it failed on the device (-EIO, -ETIMEDOUT, -ECANCELED: a dependency
 *    failed or a reset cancelled it); or the error that made the driver
 *    refuse it, as the ioctl would have returned it (-EINVAL, -ENOENT,
 *    -EFAULT, -E2BIG, -ENOSPC, -ENOMEM, -EACCES, -ENODEV). -EINVAL also for
 *    an unknown cmd_op, a non-zero byte after the struct, a ring without
 *    IORING_SETUP_SQE128, or DRM_TPU_COPY_WAIT (the CQE is the wait).
 *  - big_cqe[0] (rings with IORING_SETUP_CQE32): for
 *    DRM_TPU_URING_CMD_SUBMIT, the job id that struct drm_tpu_submit's
 *    job_id would have returned (0 with DRM_TPU_SUBMIT_NO_RECORD or when
 *    the job was refused); 0 for copies. big_cqe[1] is 0.
 * Commands in flight when the file or the ring is closed, or the
 * submitter exits, still complete: the device finishes them (or they time
 * out) and their CQEs are posted or dropped with the ring; the ring's
 * teardown waits for them. IORING_SETUP_IOPOLL rings are not supported
 * (io_uring fails the SQE with -EOPNOTSUPP).
 */
#define DRM_TPU_URING_CMD_SUBMIT	0x01	/* payload: struct drm_tpu_submit */
#define DRM_TPU_URING_CMD_COPY		0x02	/* payload: struct drm_tpu_copy */

/* Bytes of payload in a 128-byte SQE (IORING_SETUP_SQE128). */
#define DRM_TPU_URING_CMD_PAYLOAD	80

#if defined(__cplusplus)
}
#endif

#endif /* TPU_DRM_H */
