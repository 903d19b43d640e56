/* SPDX-License-Identifier: MIT */
#ifndef BENCH_ISA_PEAK_H
#define BENCH_ISA_PEAK_H

/*
 * What AVX2's own instructions allow on this host, in registers and L1:
 * the int8 kernels' ceiling against f32 (bench_gemm prints both and their
 * ratio). The best of @rounds interleaved rounds, in FLOP/s of vfmadd231ps
 * and OP/s of vpmaddwd + vpaddd per second of the calling thread's CPU
 * time, so time the host gives to others is not counted. -1 when the host
 * has no AVX2 and FMA.
 */
int isa_peak(int rounds, double *f32_flops, double *int16_ops);

#endif
