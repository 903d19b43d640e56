/* SPDX-License-Identifier: MIT */
#ifndef BENCH_ISA_PEAK_H
#define BENCH_ISA_PEAK_H

/*
 * What AVX2's own instructions allow on this host, in registers and L1:
 * the int8 kernels' ceiling against f32 (bench_gemm prints both and their
 * ratio). Each is the best of @rounds, in operations per second of the
 * calling thread's CPU time, so time the host gives to others is not
 * counted. 0 when the host has no AVX2 and FMA.
 */
double isa_peak_f32_fma(int rounds);	/* FLOP/s: vfmadd231ps */
double isa_peak_int16_madd(int rounds);	/* OP/s: vpmaddwd + vpaddd */

#endif
