/* main.c: the CPU demo.  A RISC-V CPU (PicoRV32) finds A and B in memory, has the tcore block
 * compute D = A * B through the driver, computes the same GEMM in software (the C compiler's
 * soft-float), times both with its cycle counter and reports on the console.
 *
 * The testbench fills the parameter block at PARAMS (M, N, K, format, flags) and the
 * operands; it checks D (and the software D) bit for bit after the exit. */
#include <stdint.h>
#include "tcore.h"

#define TCORE_BASE  0x10000000u
#define CONSOLE     (*(volatile uint32_t *)0x20000000u)

#define PARAMS      ((volatile uint32_t *)0x00008000u)
#define A_ADDR      0x00010000u     /* M x K, 16-bit elements, row-major */
#define B_ADDR      0x00020000u     /* K x N */
#define D_ADDR      0x00030000u     /* M x N FP32: the block's D */
#define DSW_ADDR    0x00040000u     /* M x N FP32: the software D */
#define AF_ADDR     0x00050000u     /* A and B as floats, for the software GEMM */
#define BF_ADDR     0x00060000u
#define MAX_ELEMS   16384u          /* each region holds 64 KiB */
#define PARAMS_MAGIC 0x7463646Du    /* "tcdm" */
#define FLAG_SOFTWARE 1u

/* GCC may call these even in freestanding code (struct copies, zeroing); no libc here. */
void *memset(void *dst, int c, unsigned long n)
{
    unsigned char *d = dst;
    while (n--)
        *d++ = (unsigned char)c;
    return dst;
}

void *memcpy(void *dst, const void *src, unsigned long n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    while (n--)
        *d++ = *s++;
    return dst;
}

static void put_str(const char *s)
{
    while (*s)
        CONSOLE = (uint8_t)*s++;
}

static void put_dec(uint64_t v)
{
    char buf[24];
    int i = 0;
    do {
        buf[i++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (i)
        CONSOLE = (uint8_t)buf[--i];
}

static void put_kv(const char *key, uint64_t v)
{
    put_str(" ");
    put_str(key);
    put_str("=");
    put_dec(v);
}

static uint64_t cycles(void)
{
    uint32_t hi, lo, hi2;
    do {
        __asm__ volatile ("rdcycleh %0" : "=r"(hi));
        __asm__ volatile ("rdcycle %0" : "=r"(lo));
        __asm__ volatile ("rdcycleh %0" : "=r"(hi2));
    } while (hi != hi2);
    return ((uint64_t)hi << 32) | lo;
}

typedef union { uint32_t u; float f; } bits32;

/* IEEE binary16 -> binary32, exactly (integer arithmetic: no FPU on this CPU). */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, f = h & 0x3FFu;
    bits32 x;
    if (e == 0x1F) {
        x.u = sign | 0x7F800000u | (f << 13);           /* Inf, NaN */
    } else if (e) {
        x.u = sign | ((e + 112u) << 23) | (f << 13);    /* normal: rebias 15 -> 127 */
    } else if (f) {
        e = 113u;                                       /* subnormal: normalise */
        while (!(f & 0x400u)) {
            f <<= 1;
            e--;
        }
        x.u = sign | (e << 23) | ((f & 0x3FFu) << 13);
    } else {
        x.u = sign;
    }
    return x.f;
}

static float bf16_to_float(uint16_t h)
{
    bits32 x;
    x.u = (uint32_t)h << 16;
    return x.f;
}

/* D = A * B in FP32, one product and one rounded add at a time along K (as a CPU does it). */
static void software_gemm(uint32_t m, uint32_t n, uint32_t k, uint32_t bf16)
{
    const uint16_t *a = (const uint16_t *)A_ADDR, *b = (const uint16_t *)B_ADDR;
    float *af = (float *)AF_ADDR, *bf = (float *)BF_ADDR;
    uint32_t *d = (uint32_t *)DSW_ADDR;
    for (uint32_t i = 0; i < m * k; i++)
        af[i] = bf16 ? bf16_to_float(a[i]) : half_to_float(a[i]);
    for (uint32_t i = 0; i < k * n; i++)
        bf[i] = bf16 ? bf16_to_float(b[i]) : half_to_float(b[i]);
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t j = 0; j < n; j++) {
            float acc = 0.0f;
            for (uint32_t p = 0; p < k; p++)
                acc += af[i * k + p] * bf[p * n + j];
            bits32 x;
            x.f = acc;
            d[i * n + j] = x.u;
        }
}

int main(void)
{
    uint32_t m = PARAMS[1], n = PARAMS[2], k = PARAMS[3], fmt = PARAMS[4], flags = PARAMS[5];
    uint32_t caps;
    if (PARAMS[0] != PARAMS_MAGIC || m * k > MAX_ELEMS || k * n > MAX_ELEMS || m * n > MAX_ELEMS) {
        put_str("tcore-demo: bad parameter block\n");
        return 100;
    }
    if (tcore_probe(TCORE_BASE, &caps)) {
        put_str("tcore-demo: no tcore block at the base address\n");
        return 101;
    }
    put_str("tcore-demo: found tcore");
    put_kv("caps", caps);
    put_kv("m", m);
    put_kv("n", n);
    put_kv("k", k);
    put_kv("bf16", fmt == TCORE_FMT_BF16);
    put_str("\n");

    tcore_gemm_t job = {.m = m, .n = n, .k = k, .in_fmt = fmt, .a = A_ADDR, .b = B_ADDR,
                        .d = D_ADDR};
    tcore_stats_t st = {0, 0};
    uint64_t t0 = cycles();
    int err = tcore_gemm(TCORE_BASE, &job, &st);
    uint64_t t1 = cycles();
    put_str("tcore-demo: accelerator");
    put_kv("status", (uint32_t)err);
    put_kv("cpu_clocks", t1 - t0);
    put_kv("block_cycles", st.cycles);
    put_kv("beats", st.beats);
    put_str("\n");
    if (err)
        return err < 0 ? 102 : err;

    /* A start with a bad size must come back as the block's error code. */
    tcore_gemm_t bad = job;
    bad.k = 8;
    put_str("tcore-demo: bad-size start");
    put_kv("status", (uint32_t)tcore_gemm(TCORE_BASE, &bad, 0));
    put_str("\n");

    if (flags & FLAG_SOFTWARE) {
        uint64_t t2 = cycles();
        software_gemm(m, n, k, fmt == TCORE_FMT_BF16);
        uint64_t t3 = cycles();
        put_str("tcore-demo: software");
        put_kv("cpu_clocks", t3 - t2);
        put_str("\n");
    }
    return 0;
}
