/* SPDX-License-Identifier: MIT */
/*
 * The device's roofline drawn by gnuplot: attainable FLOP/s against
 * arithmetic intensity (FLOPs per HBM byte moved), min(peak, bandwidth x
 * intensity), one roof per distinct peak (bf16, f32, int8), the ridge
 * point marked, and sets of points (published figures, the model's).
 * Every core has its own MXUs and, in the timing model, its own DMA at the
 * HBM bandwidth, so the device's roof is the config's times its cores.
 */
#ifndef TPU_ROOFLINE_H
#define TPU_ROOFLINE_H

#include <stddef.h>

#include "tpu_config.h"

#define ROOFLINE_MAX_SETS	8

struct roofline_point {
	double intensity;	/* FLOPs per HBM byte */
	double flops_per_s;
	char label[112];	/* "" for none */
};

struct roofline_set {
	char title[64];
	int point_type;		/* gnuplot's pt */
	const struct roofline_point *pts;
	int n;
};

/*
 * Draw the roofline of @cfg with @nsets sets of points into @out: SVG for
 * a name ending in .svg, PNG for .png (gnuplot's png terminal).
 * Returns 0, or -1 with a message in @err (no gnuplot, gnuplot failed).
 */
int roofline_plot(const struct tpu_config *cfg, const struct roofline_set *sets,
		  int nsets, const char *out, char *err, size_t errlen);

#endif /* TPU_ROOFLINE_H */
