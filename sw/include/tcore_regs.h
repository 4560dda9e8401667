/* tcore_regs.h: the tcore GEMM accelerator's register map.
 * Generated from rtl/regmap.py by `tcore regs --c-header`; do not edit.
 * AXI4-Lite slave, 32-bit registers, 10-bit byte offsets. */
#ifndef TCORE_REGS_H
#define TCORE_REGS_H

#define TCORE_ID_VALUE 0x74636F72u
#define TCORE_REG_SPAN 0x400u

/* Register byte offsets */
#define TCORE_REG_ID                 0x00u /* Identifies the block: 0x74636F72 ("tcor"). */
#define TCORE_REG_VERSION            0x04u /* Register-map version. */
#define TCORE_REG_CAPS               0x08u /* What this build does (read-only; set at build time). */
#define TCORE_REG_CTRL               0x0Cu /* Control. */
#define TCORE_REG_STATUS             0x10u /* Status. */
#define TCORE_REG_M                  0x14u /* Rows of A and D (a multiple of 16). */
#define TCORE_REG_N                  0x18u /* Columns of B and D (a multiple of 16). */
#define TCORE_REG_K                  0x1Cu /* Columns of A, rows of B (a multiple of 16; of 8 for TF32, 32 for FP8 and INT8). */
#define TCORE_REG_FORMAT             0x20u /* Formats. */
#define TCORE_REG_A_LO               0x24u /* Byte address of A, bits 31..0 (16-byte aligned). */
#define TCORE_REG_A_HI               0x28u /* Byte address of A, bits 63..32. */
#define TCORE_REG_B_LO               0x2Cu /* Byte address of B, bits 31..0. */
#define TCORE_REG_B_HI               0x30u /* Byte address of B, bits 63..32. */
#define TCORE_REG_C_LO               0x34u /* Byte address of C, bits 31..0. */
#define TCORE_REG_C_HI               0x38u /* Byte address of C, bits 63..32. */
#define TCORE_REG_D_LO               0x3Cu /* Byte address of D, bits 31..0. */
#define TCORE_REG_D_HI               0x40u /* Byte address of D, bits 63..32. */
#define TCORE_REG_LDA                0x44u /* Leading dimension of A in elements (row-major: >= K; rows 16-byte aligned: a multiple of 8 16-bit, 4 TF32 or 16 8-bit elements). */
#define TCORE_REG_LDB                0x48u /* Leading dimension of B in elements (>= N, or >= K for B^T; rows 16-byte aligned). */
#define TCORE_REG_LDC                0x4Cu /* Leading dimension of C in elements (>= N, a multiple of 8). */
#define TCORE_REG_LDD                0x50u /* Leading dimension of D in elements (>= N, a multiple of 8). */
#define TCORE_REG_CYCLES_LO          0x54u /* Clocks of the last (or current) run, bits 31..0. */
#define TCORE_REG_CYCLES_HI          0x58u /* Clocks, bits 63..32. */
#define TCORE_REG_BEATS_LO           0x5Cu /* Core beats of the run, bits 31..0: 64 per WMMA step of 16x16 (a beat is 64 FMA in FP16/BF16, 32 in TF32, 128 in FP8/INT8). */
#define TCORE_REG_BEATS_HI           0x60u /* Core beats, bits 63..32. */

/* Fields: _LSB, _WIDTH, _MASK (in place); build constants also _RESET */
#define TCORE_VERSION_MINOR_LSB 0u
#define TCORE_VERSION_MINOR_WIDTH 16u
#define TCORE_VERSION_MINOR_MASK 0x0000FFFFu
#define TCORE_VERSION_MINOR_RESET 2u
#define TCORE_VERSION_MAJOR_LSB 16u
#define TCORE_VERSION_MAJOR_WIDTH 16u
#define TCORE_VERSION_MAJOR_MASK 0xFFFF0000u
#define TCORE_VERSION_MAJOR_RESET 0u
#define TCORE_CAPS_FP16_LSB 0u
#define TCORE_CAPS_FP16_WIDTH 1u
#define TCORE_CAPS_FP16_MASK 0x00000001u
#define TCORE_CAPS_FP16_RESET 1u
#define TCORE_CAPS_BF16_LSB 1u
#define TCORE_CAPS_BF16_WIDTH 1u
#define TCORE_CAPS_BF16_MASK 0x00000002u
#define TCORE_CAPS_BF16_RESET 1u
#define TCORE_CAPS_ACC_F16_LSB 2u
#define TCORE_CAPS_ACC_F16_WIDTH 1u
#define TCORE_CAPS_ACC_F16_MASK 0x00000004u
#define TCORE_CAPS_ACC_F16_RESET 1u
#define TCORE_CAPS_C_GIVEN_LSB 3u
#define TCORE_CAPS_C_GIVEN_WIDTH 1u
#define TCORE_CAPS_C_GIVEN_MASK 0x00000008u
#define TCORE_CAPS_C_GIVEN_RESET 1u
#define TCORE_CAPS_TF32_LSB 4u
#define TCORE_CAPS_TF32_WIDTH 1u
#define TCORE_CAPS_TF32_MASK 0x00000010u
#define TCORE_CAPS_TF32_RESET 1u
#define TCORE_CAPS_FP8_LSB 5u
#define TCORE_CAPS_FP8_WIDTH 1u
#define TCORE_CAPS_FP8_MASK 0x00000020u
#define TCORE_CAPS_FP8_RESET 1u
#define TCORE_CAPS_INT8_LSB 6u
#define TCORE_CAPS_INT8_WIDTH 1u
#define TCORE_CAPS_INT8_MASK 0x00000040u
#define TCORE_CAPS_INT8_RESET 1u
#define TCORE_CAPS_WARPS_LSB 8u
#define TCORE_CAPS_WARPS_WIDTH 4u
#define TCORE_CAPS_WARPS_MASK 0x00000F00u
#define TCORE_CAPS_WARPS_RESET 1u
#define TCORE_CAPS_DATA_BYTES_LOG2_LSB 12u
#define TCORE_CAPS_DATA_BYTES_LOG2_WIDTH 4u
#define TCORE_CAPS_DATA_BYTES_LOG2_MASK 0x0000F000u
#define TCORE_CAPS_DATA_BYTES_LOG2_RESET 4u
#define TCORE_CAPS_MAX_TILES_LOG2_LSB 16u
#define TCORE_CAPS_MAX_TILES_LOG2_WIDTH 5u
#define TCORE_CAPS_MAX_TILES_LOG2_MASK 0x001F0000u
#define TCORE_CAPS_MAX_TILES_LOG2_RESET 10u
#define TCORE_CTRL_START_LSB 0u
#define TCORE_CTRL_START_WIDTH 1u
#define TCORE_CTRL_START_MASK 0x00000001u
#define TCORE_CTRL_IRQ_EN_LSB 1u
#define TCORE_CTRL_IRQ_EN_WIDTH 1u
#define TCORE_CTRL_IRQ_EN_MASK 0x00000002u
#define TCORE_CTRL_SOFT_RESET_LSB 2u
#define TCORE_CTRL_SOFT_RESET_WIDTH 1u
#define TCORE_CTRL_SOFT_RESET_MASK 0x00000004u
#define TCORE_STATUS_BUSY_LSB 0u
#define TCORE_STATUS_BUSY_WIDTH 1u
#define TCORE_STATUS_BUSY_MASK 0x00000001u
#define TCORE_STATUS_DONE_LSB 1u
#define TCORE_STATUS_DONE_WIDTH 1u
#define TCORE_STATUS_DONE_MASK 0x00000002u
#define TCORE_STATUS_ERROR_LSB 4u
#define TCORE_STATUS_ERROR_WIDTH 4u
#define TCORE_STATUS_ERROR_MASK 0x000000F0u
#define TCORE_FORMAT_IN_FMT_LSB 0u
#define TCORE_FORMAT_IN_FMT_WIDTH 3u
#define TCORE_FORMAT_IN_FMT_MASK 0x00000007u
#define TCORE_FORMAT_ACC_F16_LSB 4u
#define TCORE_FORMAT_ACC_F16_WIDTH 1u
#define TCORE_FORMAT_ACC_F16_MASK 0x00000010u
#define TCORE_FORMAT_B_ALT_LSB 5u
#define TCORE_FORMAT_B_ALT_WIDTH 1u
#define TCORE_FORMAT_B_ALT_MASK 0x00000020u
#define TCORE_FORMAT_C_GIVEN_LSB 8u
#define TCORE_FORMAT_C_GIVEN_WIDTH 1u
#define TCORE_FORMAT_C_GIVEN_MASK 0x00000100u
#define TCORE_FORMAT_SAT_LSB 9u
#define TCORE_FORMAT_SAT_WIDTH 1u
#define TCORE_FORMAT_SAT_MASK 0x00000200u

/* STATUS.error codes */
enum tcore_error {
    TCORE_ERR_NONE = 0,
    TCORE_ERR_BAD_SIZE = 1,
    TCORE_ERR_MISALIGNED = 2,
    TCORE_ERR_BAD_LD = 3,
    TCORE_ERR_BAD_FORMAT = 4,
    TCORE_ERR_READ_SLVERR = 5,
    TCORE_ERR_READ_DECERR = 6,
    TCORE_ERR_WRITE_SLVERR = 7,
    TCORE_ERR_WRITE_DECERR = 8,
    TCORE_ERR_ADDR_RANGE = 9,
    TCORE_ERR_ENGINE = 10,
};

/* FORMAT.in_fmt codes */
enum tcore_in_format {
    TCORE_FMT_FP16 = 0,
    TCORE_FMT_BF16 = 1,
    TCORE_FMT_TF32 = 2,
    TCORE_FMT_E4M3 = 3,
    TCORE_FMT_E5M2 = 4,
    TCORE_FMT_S8 = 5,
    TCORE_FMT_U8 = 6,
};

#endif /* TCORE_REGS_H */
