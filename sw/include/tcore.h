/* tcore.h: a small bare-metal driver for the tcore GEMM accelerator (the `soc` design).
 *
 * D = A * B (+ C) for row-major A (M x K), B (K x N; B^T, N x K, for TF32, FP8 and INT8),
 * C and D (M x N) in memory that the block's AXI4 master reaches; M and N multiples of 16,
 * K of the kind's step (16; 8 for TF32; 32 for FP8 and INT8).  The driver programs the
 * registers of tcore_regs.h in the order docs/registers.md gives, polls STATUS (no interrupt
 * handler needed) and returns the block's error code.  Copy tcore.h, tcore_regs.h and
 * tcore.c into your firmware; nothing else is needed (no libc).  See docs/driver.md.
 */
#ifndef TCORE_H
#define TCORE_H

#include <stdint.h>
#include "tcore_regs.h"

/* Driver errors: negative, unlike the block's own codes (enum tcore_error, 1..10). */
#define TCORE_ERR_NO_DEVICE (-1)  /* ID does not read 0x74636F72 */
#define TCORE_ERR_TIMEOUT   (-2)  /* STATUS.done not set within the poll budget */
#define TCORE_ERR_BUSY      (-3)  /* a run is in progress */

typedef struct {
    uint32_t m, n, k;             /* sizes, multiples of 16 */
    uint32_t in_fmt;              /* TCORE_FMT_*: FP16, BF16, TF32, E4M3, E5M2, S8, U8 */
    uint32_t acc_f16;             /* 1: C and D are FP16 (FP16 and FP8 inputs); 0: FP32 (S32) */
    uint32_t c_given;             /* 1: D = A*B + C; 0: D = A*B (C not read) */
    uint64_t a, b, c, d;          /* byte addresses as the block's AXI4 master sees them */
    uint32_t lda, ldb, ldc, ldd;  /* leading dimensions in elements; 0 means the row length
                                   * (K for B^T, the layout of TF32, FP8 and INT8) */
    uint32_t b_alt;               /* 1: B is the other FP8 format (mixed FP8) */
    uint32_t sat;                 /* 1: INT8 K steps clamp (.satfinite) instead of wrapping */
} tcore_gemm_t;

typedef struct {
    uint64_t cycles;              /* the block's clocks for the run (CYCLES) */
    uint64_t beats;               /* core beats (BEATS): 64 per 16x16 WMMA step */
} tcore_stats_t;

/* 0 when the block at `base` answers with tcore's ID (then *caps, if given, is CAPS). */
int tcore_probe(uintptr_t base, uint32_t *caps);

/* Program the registers and start; returns 0, TCORE_ERR_BUSY, or TCORE_ERR_NO_DEVICE. */
int tcore_start(uintptr_t base, const tcore_gemm_t *job);

/* Poll STATUS until done (at most `max_polls` reads, 0: no limit), clear it, fill *stats if
 * given; returns STATUS.error (0: D is in memory) or TCORE_ERR_TIMEOUT. */
int tcore_wait(uintptr_t base, uint32_t max_polls, tcore_stats_t *stats);

/* tcore_start then tcore_wait with no poll limit. */
int tcore_gemm(uintptr_t base, const tcore_gemm_t *job, tcore_stats_t *stats);

#endif /* TCORE_H */
