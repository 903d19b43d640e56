/* SPDX-License-Identifier: MIT */
/* The fuzz build's stand-in: kshim.h has check_*_overflow. */
