/* main.c: the board firmware (PicoRV32, RV32IM, bare metal).
 *
 * At reset: a self-test of one seeded GEMM per kind the build has, against the D bits the
 * build embedded from the golden model (selftest.c, generated), a line per kind on the UART
 * and the pass or fail LED.  Then it serves the framed protocol of sim/board/protocol.py
 * (tcore_board.h): INFO, WRITE, READ and RUN requests, one answer each, an ERR frame for
 * every error, and on after each.
 */
#include <stdint.h>
#include "tcore.h"
#include "tcore_board.h"
#include "selftest.h"

#define IO(off) (*(volatile uint32_t *)(TB_IO_BASE + (off)))
#define SOC TB_SOC_BASE

static uint32_t crc_table[256];
static uint32_t mem_bytes, timeout_cycles;
static uint32_t selftest_failed;
/* One frame's payload, word-aligned so that WRITE copies words. */
static uint32_t payload_words[TB_MAX_PAYLOAD / 4 + 1];
#define payload ((uint8_t *)payload_words)

static inline uint32_t cycles(void)
{
    uint32_t c;
    __asm__ volatile ("rdcycle %0" : "=r"(c));
    return c;
}

/* ---- the UART ------------------------------------------------------------------------- */

static void putc_(int c) { IO(TB_IO_UART_DATA) = (uint32_t)c & 0xFF; }

static void puts_(const char *s)
{
    while (*s)
        putc_(*s++);
}

/* An unsigned number with thousands separators (5,134). */
static void putu(uint32_t v)
{
    char buf[16];
    int n = 0, digits = 0;
    do {
        if (digits && digits % 3 == 0)
            buf[n++] = ',';
        buf[n++] = (char)('0' + v % 10);
        v /= 10;
        digits++;
    } while (v);
    while (n)
        putc_(buf[--n]);
}

/* The next received byte, or -1 when none came within timeout_cycles. */
static int getc_timeout(void)
{
    uint32_t t0 = cycles();
    for (;;) {
        int c = (int)IO(TB_IO_UART_DATA);
        if (c >= 0)
            return c;
        if (cycles() - t0 > timeout_cycles)
            return -1;
    }
}

static int getc_wait(void)
{
    int c;
    while ((c = (int)IO(TB_IO_UART_DATA)) < 0)
        ;
    return c;
}

/* Read and drop bytes until the line has been silent for timeout_cycles. */
static void drain(void)
{
    while (getc_timeout() >= 0)
        ;
}

/* ---- CRC-32 (IEEE 802.3, reflected) ----------------------------------------------------- */

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static inline uint32_t crc_byte(uint32_t crc, uint8_t b)
{
    return crc_table[(crc ^ b) & 0xFF] ^ (crc >> 8);
}

/* ---- frames ------------------------------------------------------------------------------ */

static void send_frame(uint32_t type, const uint8_t *data, uint32_t len)
{
    uint8_t head[3] = {(uint8_t)type, (uint8_t)len, (uint8_t)(len >> 8)};
    uint32_t crc = 0xFFFFFFFFu;
    putc_(TB_SYNC);
    for (int i = 0; i < 3; i++) {
        putc_(head[i]);
        crc = crc_byte(crc, head[i]);
    }
    for (uint32_t i = 0; i < len; i++) {
        putc_(data[i]);
        crc = crc_byte(crc, data[i]);
    }
    crc ^= 0xFFFFFFFFu;
    for (int i = 0; i < 4; i++)
        putc_((int)(crc >> (8 * i)));
}

static void send_words(uint32_t type, const uint32_t *w, uint32_t n)
{
    send_frame(type, (const uint8_t *)w, 4 * n);
}

static void send_error(uint32_t code, uint32_t detail)
{
    uint32_t w[2] = {code, detail};
    send_words(TB_REP_ERR, w, 2);
}

/* Receive one frame into payload; returns its type and length, or a negative error code
 * (the line drained first, so that one bad request gets one answer). */
static int recv_frame(uint32_t *len)
{
    uint8_t head[3];
    int c;
    while ((c = getc_wait()) != TB_SYNC)
        ;                                         /* text or noise between frames */
    uint32_t crc = 0xFFFFFFFFu;
    for (int i = 0; i < 3; i++) {
        if ((c = getc_timeout()) < 0)
            return -(int)TB_ERR_TRUNCATED;
        head[i] = (uint8_t)c;
        crc = crc_byte(crc, head[i]);
    }
    *len = head[1] | (uint32_t)head[2] << 8;
    if (*len > TB_MAX_PAYLOAD) {
        drain();
        return -(int)TB_ERR_LENGTH;
    }
    for (uint32_t i = 0; i < *len; i++) {
        if ((c = getc_timeout()) < 0)
            return -(int)TB_ERR_TRUNCATED;
        payload[i] = (uint8_t)c;
        crc = crc_byte(crc, (uint8_t)c);
    }
    uint32_t got = 0;
    for (int i = 0; i < 4; i++) {
        if ((c = getc_timeout()) < 0)
            return -(int)TB_ERR_TRUNCATED;
        got |= (uint32_t)c << (8 * i);
    }
    if (got != (crc ^ 0xFFFFFFFFu)) {
        drain();
        return -(int)TB_ERR_CRC;
    }
    if (IO(TB_IO_UART_STATUS) & 2u) {             /* bytes were lost: this frame is not whole */
        IO(TB_IO_UART_STATUS) = 6u;
        drain();
        return -(int)TB_ERR_OVERFLOW;
    }
    return head[0];
}

/* ---- GEMMs ------------------------------------------------------------------------------- */

/* The kinds this build runs: FORMAT.in_fmt 0..6 (the SoC block has no 2:4 sparse path). */
#define KINDS_MASK 0x7Fu

static uint32_t esize(uint32_t in_fmt)
{
    return in_fmt == TCORE_FMT_TF32 ? 4 : in_fmt <= TCORE_FMT_BF16 ? 2 : 1;
}

/* The bytes an operand of `rows` rows of `cols` elements, `ld` apart, spans from its base. */
static uint64_t span(uint32_t rows, uint32_t cols, uint32_t ld, uint32_t size)
{
    if (!rows || !cols)
        return 0;
    return ((uint64_t)(rows - 1) * (ld ? ld : cols) + cols) * size;
}

static int fits(uint64_t base, uint64_t bytes)
{
    return base + bytes <= mem_bytes;
}

static int start_gemm(const uint32_t *r, tcore_stats_t *st)
{
    uint32_t f = r[TB_RUN_FLAGS];
    tcore_gemm_t g = {
        .m = r[TB_RUN_M], .n = r[TB_RUN_N], .k = r[TB_RUN_K], .in_fmt = r[TB_RUN_IN_FMT],
        .acc_f16 = !!(f & TB_FLAG_ACC_F16), .c_given = !!(f & TB_FLAG_C_GIVEN),
        .b_alt = !!(f & TB_FLAG_B_ALT), .sat = !!(f & TB_FLAG_SAT),
        .a = r[TB_RUN_A], .b = r[TB_RUN_B], .c = r[TB_RUN_C], .d = r[TB_RUN_D],
        .lda = r[TB_RUN_LDA], .ldb = r[TB_RUN_LDB], .ldc = r[TB_RUN_LDC], .ldd = r[TB_RUN_LDD],
    };
    return tcore_gemm(SOC, &g, st);
}

static void serve_run(uint32_t len)
{
    uint32_t *r = payload_words;
    if (len != 4 * TB_RUN_WORDS) {
        send_error(TB_ERR_PAYLOAD, len);
        return;
    }
    uint32_t fmt = r[TB_RUN_IN_FMT], f = r[TB_RUN_FLAGS];
    if (fmt > 6 || !((KINDS_MASK >> fmt) & 1) || (f & TB_FLAG_SPARSE)) {
        send_error(TB_ERR_KIND, fmt | (f & TB_FLAG_SPARSE ? 0x100u : 0));
        return;
    }
    uint32_t m = r[TB_RUN_M], n = r[TB_RUN_N], k = r[TB_RUN_K], es = esize(fmt);
    uint32_t cs = fmt >= TCORE_FMT_S8 ? 4 : (f & TB_FLAG_ACC_F16) ? 2 : 4;
    int tn = fmt >= TCORE_FMT_TF32;                /* B^T, N x K */
    if (!fits(r[TB_RUN_A], span(m, k, r[TB_RUN_LDA], es)) ||
        !fits(r[TB_RUN_B], tn ? span(n, k, r[TB_RUN_LDB], es) : span(k, n, r[TB_RUN_LDB], es)) ||
        ((f & TB_FLAG_C_GIVEN) && !fits(r[TB_RUN_C], span(m, n, r[TB_RUN_LDC], cs))) ||
        !fits(r[TB_RUN_D], span(m, n, r[TB_RUN_LDD], cs))) {
        send_error(TB_ERR_FIT, mem_bytes);
        return;
    }
    tcore_stats_t st = {0, 0};
    uint32_t t0 = cycles();
    int err = start_gemm(r, &st);
    uint32_t cpu = cycles() - t0;
    if (err) {
        send_error(TB_ERR_BLOCK, (uint32_t)err);
        return;
    }
    uint32_t w[TB_DONE_WORDS];
    w[TB_DONE_STATUS] = 0;
    w[TB_DONE_CYCLES_LO] = (uint32_t)st.cycles;
    w[TB_DONE_CYCLES_HI] = (uint32_t)(st.cycles >> 32);
    w[TB_DONE_BEATS_LO] = (uint32_t)st.beats;
    w[TB_DONE_BEATS_HI] = (uint32_t)(st.beats >> 32);
    w[TB_DONE_CPU_CYCLES] = cpu;
    send_words(TB_REP_DONE, w, TB_DONE_WORDS);
}

static void serve_write(uint32_t len)
{
    if (len < 4) {
        send_error(TB_ERR_PAYLOAD, len);
        return;
    }
    uint32_t off = payload_words[0], n = len - 4;
    if (!fits(off, n)) {
        send_error(TB_ERR_RANGE, off);
        return;
    }
    volatile uint8_t *dst = (volatile uint8_t *)(TB_MEM_BASE + off);
    const uint8_t *src = payload + 4;
    uint32_t i = 0;
    if (!(off & 3))
        for (; i + 4 <= n; i += 4)
            *(volatile uint32_t *)(dst + i) = payload_words[1 + i / 4];
    for (; i < n; i++)
        dst[i] = src[i];
    uint32_t w[2] = {off, n};
    send_words(TB_REP_WRITTEN, w, 2);
}

static void serve_read(uint32_t len)
{
    if (len != 8) {
        send_error(TB_ERR_PAYLOAD, len);
        return;
    }
    uint32_t off = payload_words[0], n = payload_words[1];
    if (n > TB_MAX_PAYLOAD || !fits(off, n)) {
        send_error(TB_ERR_RANGE, off);
        return;
    }
    volatile uint8_t *src = (volatile uint8_t *)(TB_MEM_BASE + off);
    uint32_t i = 0;
    if (!(off & 3))
        for (; i + 4 <= n; i += 4)
            payload_words[i / 4] = *(volatile uint32_t *)(src + i);
    for (; i < n; i++)
        payload[i] = src[i];
    send_frame(TB_REP_DATA, payload, n);
}

static void serve_info(uint32_t len)
{
    if (len) {
        send_error(TB_ERR_PAYLOAD, len);
        return;
    }
    uint32_t w[TB_INFO_WORDS];
    w[TB_INFO_MAGIC] = IO(TB_IO_MAGIC);
    w[TB_INFO_VERSION] = TB_PROTOCOL_VERSION;
    w[TB_INFO_CLK_HZ] = IO(TB_IO_CLK_HZ);
    w[TB_INFO_DIVISOR] = IO(TB_IO_UART_DIVISOR);
    w[TB_INFO_MEM_BYTES] = mem_bytes;
    w[TB_INFO_LANES] = IO(TB_IO_LANES);
    w[TB_INFO_KINDS] = KINDS_MASK;
    w[TB_INFO_MAX_PAYLOAD] = TB_MAX_PAYLOAD;
    w[TB_INFO_SELFTEST_CASES] = selftest_count;
    w[TB_INFO_SELFTEST_FAILED] = selftest_failed;
    send_words(TB_REP_INFO, w, TB_INFO_WORDS);
}

/* ---- the self-test ----------------------------------------------------------------------- */

/* xorshift32; sim/board/firmware.py draws the same numbers. */
static uint32_t rng_state;
static uint32_t rng(void)
{
    uint32_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return rng_state = x;
}

/* Random elements of a format, a 32-bit word of them at a time (4 FP8/INT8, 2 FP16/BF16, 1
 * TF32/FP32/S32): each element's exponent field forced into a few binades below 1, so that
 * every value is finite; sim/board/firmware.py has the same masks. */
static void fill(uint32_t base, uint32_t bytes, uint32_t and_mask, uint32_t or_mask)
{
    volatile uint32_t *w = (volatile uint32_t *)(TB_MEM_BASE + base);
    for (uint32_t i = 0; i < bytes / 4; i++)
        w[i] = (rng() & and_mask) | or_mask;
}

/* The masks of each FORMAT.in_fmt (and of the accumulators: FP32 as TF32, S32 below). */
static const uint32_t AND_MASK[] = {0x8FFF8FFFu, 0x81FF81FFu, 0x81FFFFFFu, 0x9F9F9F9Fu,
                                    0x8F8F8F8Fu, 0xFFFFFFFFu, 0xFFFFFFFFu};
static const uint32_t OR_MASK[] = {0x30003000u, 0x3E003E00u, 0x3E000000u, 0x20202020u,
                                   0x30303030u, 0, 0};
#define S32_AND 0x0000FFFFu           /* an S32 C: 0..65535 */

static int run_selftest(void)
{
    uint32_t failed = 0;
    for (uint32_t i = 0; i < selftest_count; i++) {
        const selftest_case_t *t = &selftest_cases[i];
        uint32_t m = t->m, n = t->n, k = t->k, fmt = t->in_fmt, es = esize(fmt);
        uint32_t bfmt = t->b_alt ? (fmt == TCORE_FMT_E4M3 ? TCORE_FMT_E5M2 : TCORE_FMT_E4M3) : fmt;
        if (fmt == TCORE_FMT_U8)
            bfmt = TCORE_FMT_S8;
        uint32_t cfmt = fmt >= TCORE_FMT_S8 ? 0xFF : t->acc_f16 ? TCORE_FMT_FP16 : TCORE_FMT_TF32;
        uint32_t cs = t->acc_f16 ? 2 : 4;
        uint32_t a = 0, b = a + m * k * es, c = b + k * n * es, d = c + m * n * cs;
        rng_state = t->seed;
        fill(a, m * k * es, AND_MASK[fmt], OR_MASK[fmt]);
        fill(b, k * n * es, AND_MASK[bfmt], OR_MASK[bfmt]);
        if (cfmt == 0xFF)
            fill(c, m * n * cs, S32_AND, 0);
        else
            fill(c, m * n * cs, AND_MASK[cfmt], OR_MASK[cfmt]);
        uint32_t r[TB_RUN_WORDS] = {0};
        r[TB_RUN_M] = m; r[TB_RUN_N] = n; r[TB_RUN_K] = k; r[TB_RUN_IN_FMT] = fmt;
        r[TB_RUN_FLAGS] = TB_FLAG_C_GIVEN | (t->acc_f16 ? TB_FLAG_ACC_F16 : 0) |
                          (t->b_alt ? TB_FLAG_B_ALT : 0) | (t->sat ? TB_FLAG_SAT : 0);
        r[TB_RUN_A] = a; r[TB_RUN_B] = b; r[TB_RUN_C] = c; r[TB_RUN_D] = d;
        tcore_stats_t st = {0, 0};
        int err = start_gemm(r, &st);
        /* compare a word (one FP32/S32 output, two FP16) at a time */
        uint32_t differ = 0, outputs = m * n;
        const volatile uint32_t *got = (const volatile uint32_t *)(TB_MEM_BASE + d);
        const uint32_t *want = (const uint32_t *)t->expected;
        for (uint32_t j = 0; j < outputs * cs / 4; j++) {
            uint32_t x = got[j] ^ want[j];
            if (cs == 4)
                differ += x != 0;
            else
                differ += ((x & 0xFFFF) != 0) + ((x >> 16) != 0);
        }
        puts_(t->name);
        putc_(' ');
        putu(m); putc_('x'); putu(n); putc_('x'); putu(k);
        puts_(": ");
        if (err) {
            puts_("the block stopped with error ");
            putu((uint32_t)err);
            differ = outputs;
        } else {
            putu(differ); puts_(" of "); putu(outputs); puts_(" outputs differ, ");
            putu((uint32_t)st.cycles); puts_(" cycles");
        }
        puts_("\r\n");
        failed += differ != 0;
    }
    puts_("2:4 sparse: not in this build (the SoC block has no sparse path)\r\n");
    return (int)failed;
}

int main(void)
{
    mem_bytes = IO(TB_IO_MEM_BYTES);
    timeout_cycles = IO(TB_IO_TIMEOUT_CYCLES);
    crc_init();
    puts_("\r\ntcore board: ");
    putu(IO(TB_IO_LANES));
    puts_("-lane core, ");
    putu(IO(TB_IO_CLK_HZ) / 1000);
    puts_(" kHz, ");
    putu(mem_bytes / 1024);
    puts_(" KiB AXI memory; self-test\r\n");
    selftest_failed = (uint32_t)run_selftest();
    IO(TB_IO_LEDS) = selftest_failed ? 2u : 1u;
    puts_(selftest_failed ? "self-test: FAILED\r\n" : "self-test: passed\r\n");
    puts_("serving frames\r\n");
    for (;;) {
        uint32_t len = 0;
        int type = recv_frame(&len);
        switch (type) {
        case TB_REQ_INFO: serve_info(len); break;
        case TB_REQ_WRITE: serve_write(len); break;
        case TB_REQ_READ: serve_read(len); break;
        case TB_REQ_RUN: serve_run(len); break;
        default:
            if (type < 0)
                send_error((uint32_t)-type, 0);
            else
                send_error(TB_ERR_TYPE, (uint32_t)type);
        }
    }
}
