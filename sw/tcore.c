/* tcore.c: the bare-metal driver of tcore.h. */
#include "tcore.h"

static inline void wr(uintptr_t base, uint32_t off, uint32_t v)
{
    *(volatile uint32_t *)(base + off) = v;
}

static inline uint32_t rd(uintptr_t base, uint32_t off)
{
    return *(volatile uint32_t *)(base + off);
}

/* A 64-bit counter read while it may still count: HI, LO, HI again until HI holds. */
static uint64_t rd64(uintptr_t base, uint32_t lo_off, uint32_t hi_off)
{
    uint32_t hi, lo;
    do {
        hi = rd(base, hi_off);
        lo = rd(base, lo_off);
    } while (rd(base, hi_off) != hi);
    return ((uint64_t)hi << 32) | lo;
}

int tcore_probe(uintptr_t base, uint32_t *caps)
{
    if (rd(base, TCORE_REG_ID) != TCORE_ID_VALUE)
        return TCORE_ERR_NO_DEVICE;
    if (caps)
        *caps = rd(base, TCORE_REG_CAPS);
    return 0;
}

static void wr_addr(uintptr_t base, uint32_t lo_off, uint32_t hi_off, uint64_t addr)
{
    wr(base, lo_off, (uint32_t)addr);
    wr(base, hi_off, (uint32_t)(addr >> 32));
}

int tcore_start(uintptr_t base, const tcore_gemm_t *job)
{
    if (tcore_probe(base, 0))
        return TCORE_ERR_NO_DEVICE;
    if (rd(base, TCORE_REG_STATUS) & TCORE_STATUS_BUSY_MASK)
        return TCORE_ERR_BUSY;
    wr(base, TCORE_REG_STATUS, TCORE_STATUS_DONE_MASK);      /* a stale done bit */
    wr(base, TCORE_REG_M, job->m);
    wr(base, TCORE_REG_N, job->n);
    wr(base, TCORE_REG_K, job->k);
    wr(base, TCORE_REG_FORMAT,
       ((job->in_fmt << TCORE_FORMAT_IN_FMT_LSB) & TCORE_FORMAT_IN_FMT_MASK) |
       ((job->acc_f16 << TCORE_FORMAT_ACC_F16_LSB) & TCORE_FORMAT_ACC_F16_MASK) |
       ((job->c_given << TCORE_FORMAT_C_GIVEN_LSB) & TCORE_FORMAT_C_GIVEN_MASK) |
       ((job->b_alt << TCORE_FORMAT_B_ALT_LSB) & TCORE_FORMAT_B_ALT_MASK) |
       ((job->sat << TCORE_FORMAT_SAT_LSB) & TCORE_FORMAT_SAT_MASK));
    wr_addr(base, TCORE_REG_A_LO, TCORE_REG_A_HI, job->a);
    wr_addr(base, TCORE_REG_B_LO, TCORE_REG_B_HI, job->b);
    wr_addr(base, TCORE_REG_C_LO, TCORE_REG_C_HI, job->c);
    wr_addr(base, TCORE_REG_D_LO, TCORE_REG_D_HI, job->d);
    wr(base, TCORE_REG_LDA, job->lda ? job->lda : job->k);
    /* TF32, FP8 and INT8 read B^T (N x K): its rows are K long */
    wr(base, TCORE_REG_LDB, job->ldb ? job->ldb : job->in_fmt >= TCORE_FMT_TF32 ? job->k : job->n);
    wr(base, TCORE_REG_LDC, job->ldc ? job->ldc : job->n);
    wr(base, TCORE_REG_LDD, job->ldd ? job->ldd : job->n);
    /* Start with irq_en clear: this driver polls. */
    wr(base, TCORE_REG_CTRL, TCORE_CTRL_START_MASK);
    return 0;
}

int tcore_wait(uintptr_t base, uint32_t max_polls, tcore_stats_t *stats)
{
    uint32_t status, polls = 0;
    while (!((status = rd(base, TCORE_REG_STATUS)) & TCORE_STATUS_DONE_MASK))
        if (max_polls && ++polls >= max_polls)
            return TCORE_ERR_TIMEOUT;
    if (stats) {
        stats->cycles = rd64(base, TCORE_REG_CYCLES_LO, TCORE_REG_CYCLES_HI);
        stats->beats = rd64(base, TCORE_REG_BEATS_LO, TCORE_REG_BEATS_HI);
    }
    wr(base, TCORE_REG_STATUS, TCORE_STATUS_DONE_MASK);      /* clear done (drops irq) */
    return (int)((status & TCORE_STATUS_ERROR_MASK) >> TCORE_STATUS_ERROR_LSB);
}

int tcore_gemm(uintptr_t base, const tcore_gemm_t *job, tcore_stats_t *stats)
{
    int err = tcore_start(base, job);
    return err ? err : tcore_wait(base, 0, stats);
}
