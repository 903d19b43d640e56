// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>

#include "tpurt_private.h"

static _Thread_local char last_error[512];

int tpurt_vfail(int err, const char *fmt, va_list ap)
{
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	return err;
}

int tpurt_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tpurt_vfail(err, fmt, ap);
	va_end(ap);
	return err;
}

const char *tpurt_last_error(void)
{
	return last_error;
}
