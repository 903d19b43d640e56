// SPDX-License-Identifier: GPL-2.0-only
/*
 * Buffer objects: ranges of the device's HBM, handed out by a drm_mm range
 * allocator and mapped to userspace through BAR2, write-combined.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <drm/drm_file.h>
#include <drm/drm_managed.h>
#include <drm/drm_vma_manager.h>

#include "tpu_device.h"
#include "tpu_dma.h"
#include "tpu_drv.h"
#include "tpu_gem.h"
#include "../uapi/tpu_drm.h"
#include "../uapi/tpu_hw.h"

static void tpu_gem_free(struct drm_gem_object *obj)
{
	struct tpu_device *tdev = to_tpu_device(obj->dev);
	struct tpu_bo *bo = to_tpu_bo(obj);

	mutex_lock(&tdev->hbm_lock);
	if (drm_mm_node_allocated(&bo->node))
		drm_mm_remove_node(&bo->node);
	mutex_unlock(&tdev->hbm_lock);
	drm_gem_object_release(obj);
	kfree(bo);
}

static int tpu_gem_mmap(struct drm_gem_object *obj, struct vm_area_struct *vma)
{
	struct tpu_device *tdev = to_tpu_device(obj->dev);
	struct tpu_bo *bo = to_tpu_bo(obj);
	unsigned long pfn = (tdev->hbm_bus_addr + bo->node.start) >> PAGE_SHIFT;

	/* drm_gem_mmap() took a reference for the vma; the close op drops it. */
	vma->vm_pgoff = 0;
	vma->vm_flags |= VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP;
	vma->vm_page_prot = pgprot_writecombine(vm_get_page_prot(vma->vm_flags));
	return io_remap_pfn_range(vma, vma->vm_start, pfn,
				  vma->vm_end - vma->vm_start,
				  vma->vm_page_prot);
}

static const struct vm_operations_struct tpu_gem_vm_ops = {
	.open = drm_gem_vm_open,
	.close = drm_gem_vm_close,
};

static const struct drm_gem_object_funcs tpu_gem_funcs = {
	.free = tpu_gem_free,
	.mmap = tpu_gem_mmap,
	.vm_ops = &tpu_gem_vm_ops,
};

static struct tpu_bo *tpu_bo_create(struct tpu_device *tdev, u64 size)
{
	struct tpu_bo *bo;
	int ret;

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return ERR_PTR(-ENOMEM);
	bo->base.funcs = &tpu_gem_funcs;
	drm_gem_private_object_init(&tdev->drm, &bo->base, size);

	mutex_lock(&tdev->hbm_lock);
	ret = drm_mm_insert_node_generic(&tdev->hbm_mm, &bo->node, size,
					 PAGE_SIZE, 0, DRM_MM_INSERT_BEST);
	mutex_unlock(&tdev->hbm_lock);
	if (ret)
		goto err_put;

	ret = drm_gem_create_mmap_offset(&bo->base);
	if (ret)
		goto err_put;

	/* HBM keeps what its last owner left there: clear it first. */
	ret = tpu_dma_fill_sync(tdev, bo->node.start, size, 0);
	if (ret)
		goto err_put;
	return bo;

err_put:
	drm_gem_object_put(&bo->base);
	return ERR_PTR(ret);
}

int tpu_ioctl_bo_create(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	struct tpu_device *tdev = to_tpu_device(drm);
	struct drm_tpu_bo_create *args = data;
	struct tpu_bo *bo;
	u64 size;
	int ret;

	if (args->flags || !args->size)
		return -EINVAL;
	if (args->size > tdev->caps[TPU_CAP_HBM_SIZE])
		return -ENOSPC;
	size = PAGE_ALIGN(args->size);

	bo = tpu_bo_create(tdev, size);
	if (IS_ERR(bo))
		return PTR_ERR(bo);
	ret = drm_gem_handle_create(file, &bo->base, &args->handle);
	drm_gem_object_put(&bo->base);
	return ret;
}

int tpu_ioctl_bo_info(struct drm_device *drm, void *data,
		      struct drm_file *file)
{
	struct drm_tpu_bo_info *args = data;
	struct drm_gem_object *obj;

	if (args->pad)
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	args->size = obj->size;
	args->hbm_offset = to_tpu_bo(obj)->node.start;
	args->mmap_offset = drm_vma_node_offset_addr(&obj->vma_node);
	drm_gem_object_put(obj);
	return 0;
}

static void tpu_gem_fini(struct drm_device *drm, void *arg)
{
	struct tpu_device *tdev = arg;

	drm_mm_takedown(&tdev->hbm_mm);
	mutex_destroy(&tdev->hbm_lock);
}

/**
 * tpu_gem_init() - set up the HBM allocator
 * @tdev: the device, with its capabilities read
 *
 * The allocator lives as long as the DRM device: buffers can outlive the
 * PCI function's removal while files still hold them.
 *
 * Return: 0 or a negative errno.
 */
int tpu_gem_init(struct tpu_device *tdev)
{
	struct pci_dev *pdev = tdev->pdev;
	int ret;

	ret = pci_request_region(pdev, TPU_BAR_HBM, DRIVER_NAME "-hbm");
	if (ret) {
		tpu_err(tdev, "cannot claim BAR%d: %d\n", TPU_BAR_HBM, ret);
		return ret;
	}
	tdev->hbm_bus_addr = pci_resource_start(pdev, TPU_BAR_HBM);
	mutex_init(&tdev->hbm_lock);
	drm_mm_init(&tdev->hbm_mm, 0, tdev->caps[TPU_CAP_HBM_SIZE]);
	return drmm_add_action_or_reset(&tdev->drm, tpu_gem_fini, tdev);
}
