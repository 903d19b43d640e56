// SPDX-License-Identifier: MIT
#include "tpu_stream.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

void tpu_stream_copy(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t head = (16 - (uintptr_t)d % 16) % 16;

	if (n < 64 + head) {
		memcpy(d, s, n);
		return;
	}
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	/* SSE2 is part of x86-64: no run-time check needed. */
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));

		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), e);
	}
	memcpy(d, s, n);
}

void tpu_stream_fence(void)
{
	_mm_sfence();
}

#else

void tpu_stream_copy(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

void tpu_stream_fence(void)
{
}

#endif
