/* SPDX-License-Identifier: MIT */
/*
 * A provider file exercising what real ones use: block and line comments,
 * #pragma D lines, named and anonymous parameters, pointers, const,
 * fixed-width integers, uintptr_t, string, struct pointers, (void).
 */
#pragma D option quiet

provider xpdtest {
	/** Fired by `tick N`, N times; i is 1..N. */
	probe tick(int i, const char *label, uint64_t big, void *ptr);
	probe noargs();
	probe voidargs(void);
	probe str__arg(string s); // D's string: a const char * to C
	probe anon(int, char *, unsigned long long, struct xpd_thing *);
	probe many(int8_t a, uint8_t b, int16_t c, uint16_t d, int32_t e,
		   uint32_t f, int64_t g, uint64_t h, uintptr_t i, char *j,
		   const void *k, long l);
	probe neg__value(int v, short s, signed char c);
	probe lib__call(int n);
};

#pragma D attributes Evolving/Evolving/Common provider xpdtest provider
#pragma D attributes Private/Private/Unknown provider xpdtest module
