// SPDX-License-Identifier: MIT
#include "roofline.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

struct roof {
	const char *dtypes;
	double peak;
};

/* The distinct peaks of the device, largest last. */
static int roofs(const struct tpu_config *cfg, struct roof *r)
{
	double cores = (double)cfg->cores;
	int n = 0;

	if (cfg->peak_flops_bf16 == cfg->peak_flops_f32) {
		r[n++] = (struct roof){ "bf16, f32", cores * cfg->peak_flops_bf16 };
	} else {
		r[n++] = (struct roof){ "f32", cores * cfg->peak_flops_f32 };
		r[n++] = (struct roof){ "bf16", cores * cfg->peak_flops_bf16 };
	}
	r[n++] = (struct roof){ "int8", cores * cfg->peak_ops_int8 };
	return n;
}

/* The axes' ranges: the points and a decade either side of the ridge. */
static void ranges(const struct roofline_set *sets, int nsets, double ridge,
		   double bw, double peak, double *x, double *y)
{
	x[0] = ridge / 1000;
	x[1] = ridge * 20;
	y[0] = bw * x[0];
	y[1] = peak * 2;
	for (int s = 0; s < nsets; s++)
		for (int i = 0; i < sets[s].n; i++) {
			const struct roofline_point *p = &sets[s].pts[i];

			if (p->intensity / 2 < x[0])
				x[0] = p->intensity / 2;
			if (p->intensity * 2 > x[1])
				x[1] = p->intensity * 2;
			if (p->flops_per_s / 2 < y[0])
				y[0] = p->flops_per_s / 2;
		}
}

static void write_terminal(FILE *g, const char *out)
{
	size_t len = strlen(out);

	/* libgd's png: pngcairo draws some tic labels at giant sizes here */
	if (len > 4 && !strcmp(out + len - 4, ".png"))
		fputs("set terminal png size 1100,700 noenhanced\n", g);
	else
		fputs("set terminal svg size 1100,700 noenhanced font 'sans,11' "
		      "background rgb 'white'\n", g);
	fprintf(g, "set output '%s'\n", out);
}

static void write_points(FILE *g, const struct roofline_set *sets, int nsets)
{
	for (int s = 0; s < nsets; s++) {
		fprintf(g, "$set%d << EOD\n", s);
		for (int i = 0; i < sets[s].n; i++)
			fprintf(g, "%.6g %.6g \"%s\"\n", sets[s].pts[i].intensity,
				sets[s].pts[i].flops_per_s, sets[s].pts[i].label);
		fputs("EOD\n", g);
	}
}

static bool has_labels(const struct roofline_set *set)
{
	for (int i = 0; i < set->n; i++)
		if (set->pts[i].label[0])
			return true;
	return false;
}

static void write_script(FILE *g, const struct tpu_config *cfg,
			 const struct roofline_set *sets, int nsets,
			 const char *out)
{
	struct roof r[3];
	int nr = roofs(cfg, r);
	double bw = (double)cfg->hbm_bandwidth * cfg->cores;
	double ridge = r[0].peak / bw, x[2], y[2];

	ranges(sets, nsets, ridge, bw, r[nr - 1].peak, x, y);
	write_terminal(g, out);
	write_points(g, sets, nsets);
	fprintf(g, "set title \"tpu-mxu roofline: %u core(s), %.0f TFLOP/s "
		"(%s), %.0f GB/s HBM, ridge %.0f FLOPs/byte\"\n",
		cfg->cores, r[0].peak / 1e12, r[0].dtypes, bw / 1e9, ridge);
	fputs("set logscale xy\nset grid\nset key top left\n"
	      "set xlabel 'arithmetic intensity (FLOPs per HBM byte moved)'\n"
	      "set ylabel 'FLOP/s (OP/s for int8)'\nset format y '%.0e'\n"
	      "set samples 1000\n", g);
	fprintf(g, "set xrange [%g:%g]\nset yrange [%g:%g]\nbw = %.6g\n",
		x[0], x[1], y[0], y[1], bw);
	fputs("roof(x, p) = x * bw < p ? x * bw : p\n", g);
	fprintf(g, "set arrow from %g, %g to %g, %g nohead dt 2\n", ridge, y[0],
		ridge, r[0].peak);
	fprintf(g, "set label 'ridge %.0f' at %g, %g offset 1, 1\n", ridge,
		ridge, y[0] * 2);
	fputs("plot ", g);
	for (int i = 0; i < nr; i++)
		fprintf(g, "roof(x, %.6g) lw 2 title 'roof: %s peak', ",
			r[i].peak, r[i].dtypes);
	for (int s = 0; s < nsets; s++) {
		fprintf(g, "$set%d using 1:2 with points pt %d ps 1.2 title '%s', ",
			s, sets[s].point_type, sets[s].title);
		if (has_labels(&sets[s]))
			fprintf(g, "$set%d using 1:2:3 with labels font ',8' "
				"offset 0, 0.8 notitle, ", s);
	}
	fputs("1/0 notitle\n", g);	/* ends the list after its last ',' */
}

int roofline_plot(const struct tpu_config *cfg, const struct roofline_set *sets,
		  int nsets, const char *out, char *err, size_t errlen)
{
	FILE *g;
	int status;

	if (strchr(out, '\'') || strchr(out, '\n')) {
		snprintf(err, errlen, "%s: a quote or newline in the name", out);
		return -1;
	}
	/* gnuplot would draw on stdout if it cannot create the file */
	g = fopen(out, "w");
	if (!g) {
		snprintf(err, errlen, "%s: %s", out, strerror(errno));
		return -1;
	}
	fclose(g);
	fflush(stdout);
	g = popen("gnuplot", "w");
	if (!g) {
		snprintf(err, errlen, "cannot run gnuplot: %s", strerror(errno));
		return -1;
	}
	write_script(g, cfg, sets, nsets, out);
	status = pclose(g);
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		snprintf(err, errlen, "gnuplot failed writing %s%s", out,
			 WIFEXITED(status) && WEXITSTATUS(status) == 127 ?
			 " (not installed? Debian: gnuplot-nox)" : "");
		return -1;
	}
	return 0;
}
