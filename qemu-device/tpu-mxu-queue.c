/*
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * tpu-mxu queues: descriptor rings in guest memory, each consumed by its
 * own worker thread, so that copies and jobs never run on a vCPU thread.
 *
 * The worker touches guest memory only where it is RAM (see
 * tpu_guest_map), so it never needs the BQL. A guest reset never waits for
 * it inside the MMIO write: it raises the abort flag and, if a descriptor
 * is running, leaves the clearing to the worker, which finishes the reset
 * when the descriptor stops and raises the queue's vector.
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "exec/memory.h"
#include "hw/pci/msix.h"
#include "trace.h"

#include "tpu-mxu.h"

#define tpu_queue_guest_error(q, fmt, ...)                                  \
    do {                                                                    \
        qemu_log_mask(LOG_GUEST_ERROR, "tpu-mxu: queue %u: " fmt "\n",      \
                      (q)->index, ##__VA_ARGS__);                           \
        trace_tpu_mxu_err_queue((q)->index, fmt);                           \
    } while (0)

/* Guest memory for the engine: RAM only, through the device's DMA view. */
static void *tpu_guest_map(void *opaque, uint64_t addr, uint64_t *len,
                           bool write)
{
    TpuMxuState *s = opaque;
    AddressSpace *as = pci_get_address_space(PCI_DEVICE(s));
    MemoryRegion *mr;
    hwaddr xlat, plen = *len;

    RCU_READ_LOCK_GUARD();
    mr = address_space_translate(as, addr, &xlat, &plen, write,
                                 MEMTXATTRS_UNSPECIFIED);
    if (!memory_access_is_direct(mr, write)) {
        return NULL;
    }
    *len = plen;
    return address_space_map(as, addr, len, write, MEMTXATTRS_UNSPECIFIED);
}

static void tpu_guest_unmap(void *opaque, void *ptr, uint64_t len, bool write)
{
    TpuMxuState *s = opaque;

    address_space_unmap(pci_get_address_space(PCI_DEVICE(s)), ptr, len,
                        write, len);
}

void tpu_guest_mem_init(TpuMxuState *s)
{
    s->guest_mem = (struct tpu_guest_mem) {
        .opaque = s,
        .map = tpu_guest_map,
        .unmap = tpu_guest_unmap,
    };
}

static bool tpu_queue_read_area(TpuQueue *q, struct tpu_driver_area *area)
{
    uint64_t at = q->cpl + (uint64_t)q->size * TPU_CPL_SIZE;

    if (!(q->ctrl & TPU_Q_CTRL_DRIVER_AREA)) {
        return false;
    }
    if (tpu_guest_read(&q->dev->guest_mem, at, area, sizeof(*area))) {
        tpu_queue_guest_error(q, "driver area not in RAM");
        return false;
    }
    return true;
}

/*
 * Whether the driver has already retired everything up to HEAD (its
 * driver area's @head, under TPU_DRIVER_HEAD): then the MSI would only
 * interrupt it for nothing. Called with @lock held, just before sending.
 */
static bool tpu_queue_driver_caught_up(TpuQueue *q)
{
    struct tpu_driver_area area;

    if (q->irq_reset || !tpu_queue_read_area(q, &area) ||
        !(area.flags & TPU_DRIVER_HEAD) || (int32_t)(area.head - q->head) < 0) {
        return false;
    }
    q->irqs_held++;
    trace_tpu_mxu_queue_irq_suppressed(q->index, q->head);
    return true;
}

static void tpu_queue_irq_bh(void *opaque)
{
    TpuQueue *q = opaque;
    PCIDevice *pdev = PCI_DEVICE(q->dev);
    bool skip;

    qemu_mutex_lock(&q->lock);
    skip = tpu_queue_driver_caught_up(q);
    q->irq_reset = false;
    qemu_mutex_unlock(&q->lock);
    if (!skip && msix_enabled(pdev)) {
        trace_tpu_mxu_irq(TPU_MSIX_VEC_QUEUE(q->index));
        msix_notify(pdev, TPU_MSIX_VEC_QUEUE(q->index));
    }
}

static void tpu_queue_clear(TpuQueue *q);

/*
 * A reset has finished: clear the queue and raise its vector, which no
 * driver-area word may hold back. Called with @lock held, worker idle.
 */
static void tpu_queue_end_reset(TpuQueue *q)
{
    tpu_queue_clear(q);
    trace_tpu_mxu_queue_reset_done(q->index);
    q->irq_reset = true;
    qemu_bh_schedule(q->irq_bh);
}

static bool tpu_queue_has_work(TpuQueue *q)
{
    return !q->abort && (q->ctrl & TPU_Q_CTRL_ENABLE) && q->head != q->tail;
}

/* Run the descriptor in @slot; called without @lock. */
static void tpu_queue_run_one(TpuQueue *q, uint64_t ring, uint64_t cpl,
                              uint32_t slot, struct tpu_completion *c)
{
    const struct tpu_guest_mem *gm = &q->dev->guest_mem;
    uint8_t desc[TPU_DESC_SIZE];
    int64_t start = get_clock();

    memset(c, 0, sizeof(*c));
    if (tpu_guest_read(gm, ring + (uint64_t)slot * TPU_DESC_SIZE, desc,
                       sizeof(desc))) {
        c->status = TPU_STATUS_DMA_FAULT;
    } else {
        memcpy(&c->id, desc + offsetof(struct tpu_desc_header, id),
               sizeof(c->id));
        q->exec(q, desc, c);
    }
    c->busy_ns = get_clock() - start;
    if (tpu_guest_write(gm, cpl + (uint64_t)slot * TPU_CPL_SIZE, c,
                        sizeof(*c))) {
        tpu_queue_guest_error(q, "completion array not in RAM");
    }
}

/*
 * Whether the driver wants the MSI for HEAD's last advance: not while its
 * driver area says it polls (uapi/tpu_hw.h). Called with @lock held after
 * HEAD moved; the barrier pairs with the driver's between clearing the
 * flag and its last look at the completion records.
 */
static bool tpu_queue_irq_wanted(TpuQueue *q)
{
    struct tpu_driver_area area;

    smp_mb();
    if (!tpu_queue_read_area(q, &area)) {
        return true;
    }
    if (area.flags & TPU_DRIVER_NO_IRQ) {
        q->irqs_held++;
        trace_tpu_mxu_queue_irq_suppressed(q->index, q->head);
        return false;
    }
    return true;
}

static void *tpu_queue_worker(void *opaque)
{
    TpuQueue *q = opaque;
    struct tpu_completion c;

    qemu_mutex_lock(&q->lock);
    while (!q->stopping) {
        uint64_t ring, cpl;
        uint32_t idx, slot;

        if (!tpu_queue_has_work(q)) {
            qemu_cond_wait(&q->cond, &q->lock);
            continue;
        }
        idx = q->head;
        slot = idx & (q->size - 1);
        ring = q->ring;
        cpl = q->cpl;
        q->busy = true;
        qemu_mutex_unlock(&q->lock);
        trace_tpu_mxu_queue_start(q->index, idx);

        tpu_queue_run_one(q, ring, cpl, slot, &c);

        qemu_mutex_lock(&q->lock);
        q->busy = false;
        qemu_cond_broadcast(&q->cond);
        if (q->resetting) {
            tpu_queue_end_reset(q);
            continue;
        }
        q->head = idx + 1;
        q->done++;
        q->errors += c.status != TPU_STATUS_OK;
        q->bytes += c.bytes;
        q->busy_ns += c.busy_ns;
        trace_tpu_mxu_queue_complete(q->index, idx, c.status);
        if (tpu_queue_irq_wanted(q)) {
            qemu_bh_schedule(q->irq_bh);
        }
    }
    qemu_mutex_unlock(&q->lock);
    return NULL;
}

static bool tpu_queue_config_ok(TpuQueue *q)
{
    return q->size >= 2 && q->size <= TPU_Q_MAX_SIZE && is_power_of_2(q->size) &&
           !(q->ring % TPU_DESC_SIZE) && !(q->cpl % TPU_CPL_SIZE);
}

static void tpu_queue_start_reset(TpuQueue *q);

static void tpu_queue_write_ctrl(TpuQueue *q, uint32_t val)
{
    if (val & ~(TPU_Q_CTRL_ENABLE | TPU_Q_CTRL_RESET |
                TPU_Q_CTRL_DRIVER_AREA)) {
        tpu_queue_guest_error(q, "unknown CTRL bits");
        return;
    }
    if (val & TPU_Q_CTRL_RESET) {
        if (val != TPU_Q_CTRL_RESET) {
            tpu_queue_guest_error(q, "reset combined with other CTRL bits");
            return;
        }
        trace_tpu_mxu_queue_reset(q->index);
        tpu_queue_start_reset(q);
        return;
    }
    if ((val & TPU_Q_CTRL_ENABLE) && !(q->ctrl & TPU_Q_CTRL_ENABLE)) {
        if (q->busy) {
            /* Its end would advance HEAD past the new TAIL. */
            tpu_queue_guest_error(q, "enable while a descriptor still runs");
            q->status |= TPU_Q_STATUS_BAD_CONFIG;
            return;
        }
        if (!tpu_queue_config_ok(q)) {
            tpu_queue_guest_error(q, "enable with a bad RING, CPL or SIZE");
            q->status |= TPU_Q_STATUS_BAD_CONFIG;
            return;
        }
        q->head = q->tail = 0;
        q->status &= ~(TPU_Q_STATUS_BAD_CONFIG | TPU_Q_STATUS_BAD_TAIL);
    }
    q->ctrl = val;
}

/* Return whether the worker has new work to be woken for. */
static bool tpu_queue_write_tail(TpuQueue *q, uint32_t val)
{
    if (!(q->ctrl & TPU_Q_CTRL_ENABLE)) {
        tpu_queue_guest_error(q, "doorbell while disabled");
        q->status |= TPU_Q_STATUS_BAD_TAIL;
        return false;
    }
    if (val - q->head > q->size) {
        tpu_queue_guest_error(q, "doorbell beyond the ring");
        q->status |= TPU_Q_STATUS_BAD_TAIL;
        return false;
    }
    trace_tpu_mxu_queue_doorbell(q->index, val);
    q->tail = val;
    return true;
}

static void tpu_queue_write_config(TpuQueue *q, hwaddr reg, uint32_t val)
{
    if (q->ctrl & TPU_Q_CTRL_ENABLE) {
        tpu_queue_guest_error(q, "configuration write while enabled");
        return;
    }
    switch (reg) {
    case TPU_Q_RING_LO:
        q->ring = deposit64(q->ring, 0, 32, val);
        break;
    case TPU_Q_RING_HI:
        q->ring = deposit64(q->ring, 32, 32, val);
        break;
    case TPU_Q_CPL_LO:
        q->cpl = deposit64(q->cpl, 0, 32, val);
        break;
    case TPU_Q_CPL_HI:
        q->cpl = deposit64(q->cpl, 32, 32, val);
        break;
    case TPU_Q_SIZE:
        q->size = val;
        break;
    }
}

void tpu_queue_write(TpuQueue *q, hwaddr reg, uint32_t val)
{
    bool kick = false;

    qemu_mutex_lock(&q->lock);
    if (q->resetting) {
        tpu_queue_guest_error(q, "write while a reset is in progress");
        goto out;
    }
    switch (reg) {
    case TPU_Q_RING_LO:
    case TPU_Q_RING_HI:
    case TPU_Q_CPL_LO:
    case TPU_Q_CPL_HI:
    case TPU_Q_SIZE:
        tpu_queue_write_config(q, reg, val);
        break;
    case TPU_Q_CTRL:
        tpu_queue_write_ctrl(q, val);
        break;
    case TPU_Q_TAIL:
        kick = tpu_queue_write_tail(q, val);
        break;
    default:
        tpu_queue_guest_error(q, "write to a read-only or unknown register");
        break;
    }
out:
    qemu_mutex_unlock(&q->lock);
    /* Once unlocked: the woken worker need not wait again for @lock. */
    if (kick) {
        qemu_cond_broadcast(&q->cond);
    }
}

uint32_t tpu_queue_read(TpuQueue *q, hwaddr reg)
{
    QEMU_LOCK_GUARD(&q->lock);

    switch (reg) {
    case TPU_Q_RING_LO:     return q->ring;
    case TPU_Q_RING_HI:     return q->ring >> 32;
    case TPU_Q_CPL_LO:      return q->cpl;
    case TPU_Q_CPL_HI:      return q->cpl >> 32;
    case TPU_Q_SIZE:        return q->size;
    case TPU_Q_CTRL:        return q->ctrl;
    case TPU_Q_TAIL:        return q->tail;
    case TPU_Q_HEAD:        return q->head;
    case TPU_Q_STATUS:
        return q->status |
               ((q->ctrl & TPU_Q_CTRL_ENABLE) ? TPU_Q_STATUS_ENABLED : 0) |
               (q->busy ? TPU_Q_STATUS_BUSY : 0) |
               (q->resetting ? TPU_Q_STATUS_RESETTING : 0);
    case TPU_Q_DONE:        return q->done;
    case TPU_Q_ERRORS:      return q->errors;
    case TPU_Q_IRQS_HELD:   return q->irqs_held;
    case TPU_Q_BYTES_LO:    return q->bytes;
    case TPU_Q_BYTES_HI:    return q->bytes >> 32;
    case TPU_Q_BUSY_NS_LO:  return q->busy_ns;
    case TPU_Q_BUSY_NS_HI:  return q->busy_ns >> 32;
    default:
        tpu_queue_guest_error(q, "read of an unknown register");
        return 0;
    }
}

/* Return the queue's registers to 0; called with @lock held, worker idle. */
static void tpu_queue_clear(TpuQueue *q)
{
    q->ring = q->cpl = 0;
    q->size = q->ctrl = q->tail = q->head = q->status = 0;
    q->done = q->errors = q->irqs_held = 0;
    q->bytes = q->busy_ns = 0;
    q->resetting = false;
    atomic_store(&q->abort, false);
}

/*
 * Stop the queue: the running descriptor aborts, the rest are dropped.
 * Called with @lock held, from an MMIO write: an idle queue is cleared at
 * once, a busy one by its worker when the descriptor has stopped.
 */
static void tpu_queue_start_reset(TpuQueue *q)
{
    if (!q->busy) {
        tpu_queue_end_reset(q);
        return;
    }
    q->resetting = true;
    atomic_store(&q->abort, true);
}

/* Start resetting the queue; tpu_queue_resetting() says when it is done. */
void tpu_queue_reset_async(TpuQueue *q)
{
    QEMU_LOCK_GUARD(&q->lock);

    if (!q->resetting) {
        tpu_queue_start_reset(q);
    }
}

bool tpu_queue_resetting(TpuQueue *q)
{
    QEMU_LOCK_GUARD(&q->lock);

    return q->resetting;
}

/*
 * Reset and wait for the worker: for the machine's reset, not a guest's
 * register write. The engine stops within milliseconds of the abort.
 */
void tpu_queue_reset(TpuQueue *q)
{
    QEMU_LOCK_GUARD(&q->lock);

    if (!q->resetting) {
        tpu_queue_start_reset(q);
    }
    while (q->resetting) {
        qemu_cond_wait(&q->cond, &q->lock);
    }
}

void tpu_queue_init(TpuQueue *q, TpuMxuState *s, unsigned int index,
                    TpuQueueExec *exec)
{
    char name[32];

    q->dev = s;
    q->index = index;
    q->exec = exec;
    qemu_mutex_init(&q->lock);
    qemu_cond_init(&q->cond);
    q->irq_bh = qemu_bh_new(tpu_queue_irq_bh, q);
    snprintf(name, sizeof(name), "tpu-mxu-q%u", index);
    qemu_thread_create(&q->thread, name, tpu_queue_worker, q,
                       QEMU_THREAD_JOINABLE);
}

void tpu_queue_fini(TpuQueue *q)
{
    qemu_mutex_lock(&q->lock);
    q->stopping = true;
    atomic_store(&q->abort, true);
    qemu_cond_broadcast(&q->cond);
    qemu_mutex_unlock(&q->lock);
    qemu_thread_join(&q->thread);
    qemu_bh_delete(q->irq_bh);
    qemu_cond_destroy(&q->cond);
    qemu_mutex_destroy(&q->lock);
}
