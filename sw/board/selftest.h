/* selftest.h: the reset self-test's cases (selftest.c is generated per build by
 * sim/board/firmware.py, with the expected D bits of the golden model). */
#ifndef SELFTEST_H
#define SELFTEST_H
#include <stdint.h>

typedef struct {
    const char *name;             /* e.g. "fp16->fp32" */
    uint32_t m, n, k;
    uint32_t in_fmt;              /* FORMAT.in_fmt */
    uint32_t b_alt, acc_f16, sat;
    uint32_t seed;                /* xorshift32's first state: A, then B, then C drawn */
    const void *expected;         /* D: M x N uint32_t, or uint16_t with acc_f16 */
} selftest_case_t;

extern const selftest_case_t selftest_cases[];
extern const uint32_t selftest_count;

#endif /* SELFTEST_H */
