/*
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * tpu-mxu: state shared by the device's files.
 */
#ifndef HW_TPU_MXU_H
#define HW_TPU_MXU_H

#include "hw/pci/pci.h"
#include "qemu/thread.h"
#include "qom/object.h"

#include "tpu_hw.h"
#include "tpu_config.h"
#include "tpu_compute.h"
#include "tpu_copy.h"

#define TYPE_TPU_MXU "tpu-mxu"
OBJECT_DECLARE_SIMPLE_TYPE(TpuMxuState, TPU_MXU)

typedef struct TpuQueue TpuQueue;

/* Execute one descriptor (TPU_DESC_SIZE bytes) and fill its completion. */
typedef void TpuQueueExec(TpuQueue *q, const void *desc,
                          struct tpu_completion *cpl);

struct TpuQueue {
    TpuMxuState *dev;
    unsigned int index;
    TpuQueueExec *exec;

    QemuThread thread;
    QemuMutex lock;
    QemuCond cond;          /* work arrived, or the worker went idle */
    QEMUBH *irq_bh;

    /* Registers and worker state, under @lock. */
    uint64_t ring;
    uint64_t cpl;
    uint32_t size;
    uint32_t ctrl;
    uint32_t tail;
    uint32_t head;
    uint32_t status;
    uint32_t done;
    uint32_t errors;
    uint32_t irqs_held;     /* MSIs not sent: the driver area said so */
    uint64_t bytes;
    uint64_t busy_ns;
    bool busy;              /* the worker is executing a descriptor */
    bool resetting;         /* a reset waits for the worker to stop */
    bool irq_reset;         /* the pending MSI is a reset's end: always sent */
    bool stopping;

    /* Polled by long copies, without @lock, to stop early on reset. */
    atomic_bool abort;
};

struct TpuMxuState {
    PCIDevice parent_obj;

    MemoryRegion regs;
    MemoryRegion hbm;
    uint8_t *hbm_ptr;

    struct tpu_config cfg;
    struct tpu_engine *engine;
    struct tpu_guest_mem guest_mem;
    struct tpu_hbm_discard hbm_discard;
    TpuQueue queues[TPU_NUM_QUEUES];

    uint32_t scratch;
    uint32_t reset_count;
};

void tpu_queue_init(TpuQueue *q, TpuMxuState *s, unsigned int index,
                    TpuQueueExec *exec);
void tpu_queue_fini(TpuQueue *q);
void tpu_queue_reset(TpuQueue *q);
void tpu_queue_reset_async(TpuQueue *q);
bool tpu_queue_resetting(TpuQueue *q);
uint32_t tpu_queue_read(TpuQueue *q, hwaddr reg);
void tpu_queue_write(TpuQueue *q, hwaddr reg, uint32_t val);

void tpu_guest_mem_init(TpuMxuState *s);

#endif /* HW_TPU_MXU_H */
