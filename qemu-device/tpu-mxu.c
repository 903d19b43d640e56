/*
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * tpu-mxu: an emulated TPU-style accelerator (QEMU PCI glue).
 *
 * BAR0 holds the registers of uapi/tpu_hw.h, BAR2 the device's HBM, BAR4
 * the MSI-X table. Job semantics and the device configuration live in the
 * QEMU-independent engine/ library; this file only connects it to the bus.
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qemu/module.h"
#include "qapi/error.h"
#include "hw/pci/pci.h"
#include "hw/pci/msix.h"
#include "hw/qdev-properties.h"
#include "migration/vmstate.h"
#include "trace.h"

#include "tpu-mxu.h"

/* The engine reads descriptors in host order. */
QEMU_BUILD_BUG_ON(HOST_BIG_ENDIAN);
QEMU_BUILD_BUG_ON(sizeof(struct tpu_dma_desc) != TPU_DESC_SIZE);
QEMU_BUILD_BUG_ON(sizeof(struct tpu_compute_desc) != TPU_DESC_SIZE);
QEMU_BUILD_BUG_ON(sizeof(struct tpu_completion) != TPU_CPL_SIZE);
QEMU_BUILD_BUG_ON(sizeof(struct tpu_driver_area) != TPU_CPL_SIZE);

#define TPU_REG_QUEUE_END TPU_REG_Q(TPU_NUM_QUEUES, 0)

/* Log a guest programming error and fire its trace point together. */
#define tpu_mxu_guest_error(addr, fmt, ...)                                 \
    do {                                                                    \
        qemu_log_mask(LOG_GUEST_ERROR, "tpu-mxu: " fmt " (offset 0x%"       \
                      HWADDR_PRIx ")\n", ##__VA_ARGS__, (hwaddr)(addr));    \
        trace_tpu_mxu_err_access(addr);                                     \
    } while (0)

/*
 * Reset the device. From a guest's register write (@wait false) the
 * queues stop asynchronously, TPU_STATUS_READY clear until they have; the
 * machine's reset waits for them.
 */
static void tpu_mxu_reset_state(TpuMxuState *s, bool wait)
{
    unsigned int i;

    for (i = 0; i < TPU_NUM_QUEUES; i++) {
        if (wait) {
            tpu_queue_reset(&s->queues[i]);
        } else {
            tpu_queue_reset_async(&s->queues[i]);
        }
    }
    s->scratch = 0;
    s->reset_count++;
    trace_tpu_mxu_reset(s->reset_count);
}

static uint32_t tpu_mxu_status(TpuMxuState *s)
{
    unsigned int i;

    for (i = 0; i < TPU_NUM_QUEUES; i++) {
        if (tpu_queue_resetting(&s->queues[i])) {
            return 0;
        }
    }
    return TPU_STATUS_READY;
}

static TpuQueue *tpu_mxu_queue_at(TpuMxuState *s, hwaddr addr)
{
    return &s->queues[(addr - TPU_REG_QUEUE_BASE) / TPU_REG_QUEUE_STRIDE];
}

/* Zero fills of whole huge pages give the pages back (tpu_hbm_discard). */
static int tpu_mxu_hbm_discard(void *opaque, uint64_t offset, uint64_t len)
{
    TpuMxuState *s = opaque;

    return ram_block_discard_range(s->hbm.ram_block, offset, len);
}

static void tpu_mxu_dma_exec(TpuQueue *q, const void *desc,
                             struct tpu_completion *cpl)
{
    TpuMxuState *s = q->dev;
    struct tpu_desc_result res;

    tpu_copy_run(desc, s->hbm_ptr, s->cfg.hbm_size, &s->guest_mem,
                 &s->hbm_discard, &q->abort, &res);
    cpl->status = res.status;
    cpl->detail = res.detail;
    cpl->bytes = res.bytes;
}

static void tpu_mxu_compute_exec(TpuQueue *q, const void *desc,
                                 struct tpu_completion *cpl)
{
    TpuMxuState *s = q->dev;
    struct tpu_desc_result res;

    tpu_compute_run(s->engine, desc, s->hbm_ptr, s->cfg.hbm_size,
                    &s->guest_mem, &q->abort, &res);
    cpl->status = res.status;
    cpl->detail = res.detail;
    cpl->bytes = res.bytes;
}

static uint64_t tpu_mxu_cap_read(TpuMxuState *s, hwaddr addr)
{
    unsigned int index = (addr - TPU_REG_CAP_BASE) / 8;
    uint64_t cap = tpu_config_cap(&s->cfg, index);

    return (addr & 4) ? cap >> 32 : (uint32_t)cap;
}

static uint64_t tpu_mxu_mmio_read(void *opaque, hwaddr addr, unsigned size)
{
    TpuMxuState *s = opaque;
    uint64_t val;

    switch (addr) {
    case TPU_REG_MAGIC:
        val = TPU_MAGIC;
        break;
    case TPU_REG_VERSION:
        val = TPU_ABI_MAJOR << 16 | TPU_ABI_MINOR;
        break;
    case TPU_REG_SCRATCH:
        val = s->scratch;
        break;
    case TPU_REG_STATUS:
        val = tpu_mxu_status(s);
        break;
    case TPU_REG_RESET_COUNT:
        val = s->reset_count;
        break;
    case TPU_REG_CAP_BASE ... TPU_REG_CAP(TPU_CAP_COUNT) - 1:
        val = tpu_mxu_cap_read(s, addr);
        break;
    case TPU_REG_QUEUE_BASE ... TPU_REG_QUEUE_END - 1:
        val = tpu_queue_read(tpu_mxu_queue_at(s, addr),
                             addr % TPU_REG_QUEUE_STRIDE);
        break;
    default:
        tpu_mxu_guest_error(addr, "read of an unknown register");
        val = 0;
        break;
    }
    trace_tpu_mxu_read(addr, val);
    return val;
}

static void tpu_mxu_mmio_write(void *opaque, hwaddr addr, uint64_t val,
                               unsigned size)
{
    TpuMxuState *s = opaque;

    trace_tpu_mxu_write(addr, val);
    switch (addr) {
    case TPU_REG_SCRATCH:
        s->scratch = val;
        break;
    case TPU_REG_RESET:
        if (val != TPU_RESET_KEY) {
            tpu_mxu_guest_error(addr, "reset with a wrong key 0x%" PRIx64,
                                val);
            break;
        }
        tpu_mxu_reset_state(s, false);
        break;
    case TPU_REG_IRQ_RAISE:
        if (val != 1) {
            tpu_mxu_guest_error(addr, "irq raise of 0x%" PRIx64, val);
            break;
        }
        if (msix_enabled(PCI_DEVICE(s))) {
            trace_tpu_mxu_irq(TPU_MSIX_VEC_TEST);
            msix_notify(PCI_DEVICE(s), TPU_MSIX_VEC_TEST);
        }
        break;
    case TPU_REG_MAGIC:
    case TPU_REG_VERSION:
    case TPU_REG_STATUS:
    case TPU_REG_RESET_COUNT:
    case TPU_REG_CAP_BASE ... TPU_REG_CAP(TPU_CAP_COUNT) - 1:
        tpu_mxu_guest_error(addr, "write to a read-only register");
        break;
    case TPU_REG_QUEUE_BASE ... TPU_REG_QUEUE_END - 1:
        tpu_queue_write(tpu_mxu_queue_at(s, addr),
                        addr % TPU_REG_QUEUE_STRIDE, val);
        break;
    default:
        tpu_mxu_guest_error(addr, "write to an unknown register");
        break;
    }
}

static const MemoryRegionOps tpu_mxu_mmio_ops = {
    .read = tpu_mxu_mmio_read,
    .write = tpu_mxu_mmio_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 4,
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 4,
    },
};

static void tpu_mxu_realize(PCIDevice *pdev, Error **errp)
{
    TpuMxuState *s = TPU_MXU(pdev);
    char err[256];
    unsigned int i;

    if (tpu_config_check(&s->cfg, err, sizeof(err))) {
        error_setg(errp, "tpu-mxu: %s", err);
        return;
    }

    memory_region_init_io(&s->regs, OBJECT(s), &tpu_mxu_mmio_ops, s,
                          "tpu-mxu.regs", TPU_REGS_SIZE);
    pci_register_bar(pdev, TPU_BAR_REGS, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->regs);

    memory_region_init_ram(&s->hbm, OBJECT(s), "tpu-mxu.hbm",
                           s->cfg.hbm_size, errp);
    if (*errp) {
        return;
    }
    pci_register_bar(pdev, TPU_BAR_HBM,
                     PCI_BASE_ADDRESS_SPACE_MEMORY |
                     PCI_BASE_ADDRESS_MEM_TYPE_64 |
                     PCI_BASE_ADDRESS_MEM_PREFETCH,
                     &s->hbm);
    s->hbm_ptr = memory_region_get_ram_ptr(&s->hbm);
    s->hbm_discard = (struct tpu_hbm_discard){
        .zero = tpu_mxu_hbm_discard, .opaque = s,
    };

    if (msix_init_exclusive_bar(pdev, TPU_MSIX_VECTORS, TPU_BAR_MSIX, errp)) {
        return;
    }
    for (i = 0; i < TPU_MSIX_VECTORS; i++) {
        msix_vector_use(pdev, i);
    }

    s->engine = tpu_engine_create(&s->cfg, err, sizeof(err));
    if (!s->engine) {
        error_setg(errp, "tpu-mxu: %s", err);
        return;
    }

    tpu_guest_mem_init(s);
    tpu_queue_init(&s->queues[TPU_QUEUE_DMA], s, TPU_QUEUE_DMA,
                   tpu_mxu_dma_exec);
    tpu_queue_init(&s->queues[TPU_QUEUE_COMPUTE], s, TPU_QUEUE_COMPUTE,
                   tpu_mxu_compute_exec);
}

static void tpu_mxu_exit(PCIDevice *pdev)
{
    TpuMxuState *s = TPU_MXU(pdev);
    unsigned int i;

    for (i = 0; i < TPU_NUM_QUEUES; i++) {
        tpu_queue_fini(&s->queues[i]);
    }
    tpu_engine_destroy(s->engine);
    msix_uninit_exclusive_bar(pdev);
}

static void tpu_mxu_reset(DeviceState *dev)
{
    tpu_mxu_reset_state(TPU_MXU(dev), true);
}

/* One property per device parameter (uapi/tpu_params.h). */
#define TPU_MXU_PROP(id, field, index, name, type, def, ...) \
    DEFINE_PROP_##type(name, TpuMxuState, cfg.field, def),

/* What `-device tpu-mxu,help` says of each. */
#define TPU_MXU_PROP_DESCRIPTION(id, field, index, name, type, def, min, max, \
                                 unit, desc)                              \
    object_class_property_set_description(klass, name, desc " (" unit ")");

static Property tpu_mxu_properties[] = {
    TPU_PARAMS(TPU_MXU_PROP)
    DEFINE_PROP_END_OF_LIST(),
};

/* Worker threads and in-flight jobs make the device unmigratable. */
static const VMStateDescription tpu_mxu_vmstate = {
    .name = TYPE_TPU_MXU,
    .unmigratable = 1,
};

static void tpu_mxu_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    k->realize = tpu_mxu_realize;
    k->exit = tpu_mxu_exit;
    k->vendor_id = TPU_PCI_VENDOR_ID;
    k->device_id = TPU_PCI_DEVICE_ID;
    k->revision = TPU_PCI_REVISION;
    k->class_id = PCI_CLASS_PROCESSOR_CO;
    dc->desc = "TPU-style accelerator with HBM, VMEM and a matrix unit";
    dc->reset = tpu_mxu_reset;
    dc->vmsd = &tpu_mxu_vmstate;
    device_class_set_props(dc, tpu_mxu_properties);
    TPU_PARAMS(TPU_MXU_PROP_DESCRIPTION)
    set_bit(DEVICE_CATEGORY_MISC, dc->categories);
}

static const TypeInfo tpu_mxu_info = {
    .name = TYPE_TPU_MXU,
    .parent = TYPE_PCI_DEVICE,
    .instance_size = sizeof(TpuMxuState),
    .class_init = tpu_mxu_class_init,
    .interfaces = (InterfaceInfo[]) {
        { INTERFACE_CONVENTIONAL_PCI_DEVICE },
        { },
    },
};

static void tpu_mxu_register_types(void)
{
    type_register_static(&tpu_mxu_info);
}

type_init(tpu_mxu_register_types)
