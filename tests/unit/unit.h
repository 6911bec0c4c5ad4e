/* SPDX-License-Identifier: MIT */
/* Common includes for the cmocka unit tests. */
#ifndef XP_UNIT_H
#define XP_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#endif
