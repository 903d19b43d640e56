/* SPDX-License-Identifier: MIT */
/*
 * Force-included into the engine's sources in the fuzz build: clang 14's
 * __builtin_cpu_supports does not know "avxvnni" (gcc's does), so that one
 * is answered from CPUID (leaf 7, sub-leaf 1, EAX bit 4) and the rest are
 * passed through.
 */
#ifndef FUZZ_CLANG_CPU_H
#define FUZZ_CLANG_CPU_H

#include <cpuid.h>
#include <string.h>

static inline int fuzz_cpu_supports(const char *feature)
{
	unsigned int a, b, c, d;

	if (!strcmp(feature, "avxvnni"))
		return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
	if (!strcmp(feature, "avx2"))
		return __builtin_cpu_supports("avx2");
	if (!strcmp(feature, "fma"))
		return __builtin_cpu_supports("fma");
	if (!strcmp(feature, "avx512f"))
		return __builtin_cpu_supports("avx512f");
	if (!strcmp(feature, "avx512bw"))
		return __builtin_cpu_supports("avx512bw");
	if (!strcmp(feature, "avx512vnni"))
		return __builtin_cpu_supports("avx512vnni");
	return 0;
}

#define __builtin_cpu_supports(feature) fuzz_cpu_supports(feature)

#endif /* FUZZ_CLANG_CPU_H */
