/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __TPU_URING_H__
#define __TPU_URING_H__

struct io_comp_batch;
struct io_uring_cmd;

int tpu_uring_cmd(struct io_uring_cmd *cmd, unsigned int issue_flags);
int tpu_uring_cmd_iopoll(struct io_uring_cmd *cmd, struct io_comp_batch *iob,
			 unsigned int poll_flags);

#endif /* __TPU_URING_H__ */
