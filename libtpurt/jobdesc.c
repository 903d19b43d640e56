// SPDX-License-Identifier: MIT
/*
 * Job descriptors (uapi/tpu_job.h): filled in place by pallas_call, then
 * laid out as one blob, each array 8-byte aligned after the header.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt_private.h"

int tpurt_desc_add_program(struct tpurt_desc *d, const struct tpurt_program *prog,
			   struct tpu_job_prog *out)
{
	struct tpu_job_header *h = &d->h;

	if (h->num_insns + prog->len > TPU_JOB_MAX_INSNS)
		return tpurt_fail(-E2BIG, "job: more than %d scalar-core instructions",
				  TPU_JOB_MAX_INSNS);
	out->offset = h->num_insns;
	out->len = (uint16_t)prog->len;
	out->reserved = 0;
	for (unsigned int i = 0; i < prog->len; i++)
		d->insn[h->num_insns++] = (struct tpu_job_insn){
			.op = prog->insn[i].op, .arg = prog->insn[i].arg };
	return 0;
}

static size_t align8(size_t v)
{
	return (v + 7) & ~(size_t)7;
}

int tpurt_desc_finish(struct tpurt_desc *d, void **blobp, size_t *lenp)
{
	struct tpu_job_header *h = &d->h;
	size_t at = sizeof(*h);
	uint8_t *blob;

	h->magic = TPU_JOB_MAGIC;
	h->version = TPU_JOB_VERSION;
	h->header_size = sizeof(*h);
	h->operands_offset = at;
	at = align8(at + h->num_operands * sizeof(d->operand[0]));
	h->scratch_offset = at;
	at = align8(at + h->num_scratch * sizeof(d->scratch[0]));
	h->ops_offset = at;
	at = align8(at + h->num_ops * sizeof(d->op[0]));
	h->code_offset = at;
	at = align8(at + h->num_insns * sizeof(d->insn[0]));
	h->windows_offset = h->num_windows ? at : 0;
	at = align8(at + h->num_windows * sizeof(d->window[0]));
	if (at > TPU_JOB_MAX_SIZE)
		return tpurt_fail(-E2BIG, "job: descriptor of %zu bytes is over %u",
				  at, TPU_JOB_MAX_SIZE);
	h->total_size = (uint32_t)at;
	blob = calloc(1, at);
	if (!blob)
		return tpurt_fail(-ENOMEM, "out of memory");
	memcpy(blob, h, sizeof(*h));
	memcpy(blob + h->operands_offset, d->operand,
	       h->num_operands * sizeof(d->operand[0]));
	memcpy(blob + h->scratch_offset, d->scratch,
	       h->num_scratch * sizeof(d->scratch[0]));
	memcpy(blob + h->ops_offset, d->op, h->num_ops * sizeof(d->op[0]));
	memcpy(blob + h->code_offset, d->insn, h->num_insns * sizeof(d->insn[0]));
	memcpy(blob + h->windows_offset, d->window,
	       h->num_windows * sizeof(d->window[0]));
	*blobp = blob;
	*lenp = at;
	return 0;
}
