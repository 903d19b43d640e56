// SPDX-License-Identifier: MIT
/*
 * The vector kernels one float at a time, for hosts with neither AVX2 nor
 * AVX-512 (the kernels themselves are tpu_vec_impl.h): a "vector" is a
 * float, its mask a bool, and the transcendentals SLEEF's scalar u10
 * functions, so this path agrees closely with the wide ones.
 */
#include <math.h>
#include <sleef.h>
#include <stdbool.h>
#include <string.h>

#include "tpu_vec_int.h"

#define VW	1
#define DW	1
#define NDH	1
#define KERNELS	tpu_vec_scalar_kernels

typedef float V;
typedef bool M;
typedef double D;
typedef bool DM;

static inline V vload(const float *p) { return *p; }
static inline void vstore(float *p, V x) { *p = x; }
static inline V vset1(float f) { return f; }

static inline uint32_t bits_of(float f)
{
	uint32_t b;

	memcpy(&b, &f, sizeof(b));
	return b;
}

static inline float float_of(uint32_t b)
{
	float f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

static inline uint64_t dbits_of(double d)
{
	uint64_t b;

	memcpy(&b, &d, sizeof(b));
	return b;
}

static inline double double_of(uint64_t b)
{
	double d;

	memcpy(&d, &b, sizeof(d));
	return d;
}

static inline V vbits(uint32_t b) { return float_of(b); }
static inline V vadd(V a, V b) { return a + b; }
static inline V vsub(V a, V b) { return a - b; }
static inline V vmul(V a, V b) { return a * b; }
static inline V vdiv(V a, V b) { return a / b; }
static inline V vsqrt(V x) { return sqrtf(x); }
/* glibc's floorf and ceilf hand a signalling NaN back as it came */
static inline V vfloor(V x) { return isnan(x) ? x + x : floorf(x); }
static inline V vceil(V x) { return isnan(x) ? x + x : ceilf(x); }
static inline V vrint(V x) { return nearbyintf(x); }	/* ties to even */
static inline V vand(V a, V b) { return float_of(bits_of(a) & bits_of(b)); }
static inline V vor(V a, V b) { return float_of(bits_of(a) | bits_of(b)); }
static inline V vxor(V a, V b) { return float_of(bits_of(a) ^ bits_of(b)); }
static inline V vmax_raw(V a, V b) { return a > b ? a : b; }
static inline V vmin_raw(V a, V b) { return a < b ? a : b; }

static inline M veq(V a, V b) { return a == b; }
static inline M vne(V a, V b) { return !(a == b); }
static inline M vlt(V a, V b) { return a < b; }
static inline M vle(V a, V b) { return a <= b; }
static inline M vgt(V a, V b) { return a > b; }
static inline M vge(V a, V b) { return a >= b; }
static inline M vunord(V a, V b) { return isnan(a) || isnan(b); }
static inline M mand(M a, M b) { return a && b; }
static inline M mor(M a, M b) { return a || b; }
static inline V vblend(M m, V f, V t) { return m ? t : f; }

static inline V vexp(V x) { return Sleef_expf_u10(x); }
static inline V vlog(V x) { return Sleef_logf_u10(x); }
static inline V vlog1p(V x) { return Sleef_log1pf_u10(x); }
static inline V vexp2(V x) { return Sleef_exp2f_u10(x); }
static inline V vtanh(V x) { return Sleef_tanhf_u10(x); }
static inline V vsin(V x) { return Sleef_sinf_u10(x); }
static inline V vcos(V x) { return Sleef_cosf_u10(x); }
static inline V verf(V x) { return Sleef_erff_u10(x); }
static inline V vpow(V a, V b) { return Sleef_powf_u10(a, b); }

static inline M vmask_bytes(const uint8_t *p) { return *p != 0; }
static inline V vbf16(const uint16_t *p) { return float_of((uint32_t)*p << 16); }

static inline D dset1(double d) { return d; }
static inline D dadd(D a, D b) { return a + b; }
static inline D dmul(D a, D b) { return a * b; }
static inline D ddiv(D a, D b) { return a / b; }
static inline D dsqrt(D x) { return sqrt(x); }
static inline D dfmod(D a, D b) { return Sleef_fmod(a, b); }
static inline D dexp(D x) { return Sleef_exp_u10(x); }
static inline D dload(const double *p) { return *p; }
static inline void dstore(double *p, D x) { *p = x; }
static inline D dload_f(const float *p) { return *p; }
static inline D dmax_raw(D a, D b) { return a > b ? a : b; }
static inline D dmin_raw(D a, D b) { return a < b ? a : b; }
static inline D dand(D a, D b) { return double_of(dbits_of(a) & dbits_of(b)); }
static inline D dor(D a, D b) { return double_of(dbits_of(a) | dbits_of(b)); }
static inline DM deq(D a, D b) { return a == b; }
static inline DM dunord(D a, D b) { return isnan(a) || isnan(b); }
static inline D dblend(DM m, D f, D t) { return m ? t : f; }

static inline void vsplit(V x, D h[NDH]) { h[0] = x; }
static inline V vjoin(const D h[NDH]) { return (float)h[0]; }

#include "tpu_vec_impl.h"
