// A behavioural MULT18X18D for lint and simulation of the `dsp="ecp5"` MMA4 (Yosys ships only a
// blackbox): unsigned 18x18 product with the input, pipeline and output registers on CLK0, the
// configuration rtl/datapath.py instantiates (REG_*_CLK = "CLK0", CE0 = 1, RST0 = 0, C unused).
/* verilator lint_off UNUSEDSIGNAL */
/* verilator lint_off UNUSEDPARAM */
/* verilator lint_off DECLFILENAME */
module MULT18X18D #(
    parameter REG_INPUTA_CLK = "NONE", parameter REG_INPUTB_CLK = "NONE",
    parameter REG_PIPELINE_CLK = "NONE", parameter REG_OUTPUT_CLK = "NONE",
    parameter GSR = "ENABLED", parameter RESETMODE = "SYNC"
) (
    input A0, input B0, input C0,
    input A1, input B1, input C1,
    input A2, input B2, input C2,
    input A3, input B3, input C3,
    input A4, input B4, input C4,
    input A5, input B5, input C5,
    input A6, input B6, input C6,
    input A7, input B7, input C7,
    input A8, input B8, input C8,
    input A9, input B9, input C9,
    input A10, input B10, input C10,
    input A11, input B11, input C11,
    input A12, input B12, input C12,
    input A13, input B13, input C13,
    input A14, input B14, input C14,
    input A15, input B15, input C15,
    input A16, input B16, input C16,
    input A17, input B17, input C17,
    input SIGNEDA, input SIGNEDB, input SOURCEA, input SOURCEB,
    input CLK0, input CLK1, input CLK2, input CLK3,
    input CE0, input CE1, input CE2, input CE3,
    input RST0, input RST1, input RST2, input RST3,
    output P0,
    output P1,
    output P2,
    output P3,
    output P4,
    output P5,
    output P6,
    output P7,
    output P8,
    output P9,
    output P10,
    output P11,
    output P12,
    output P13,
    output P14,
    output P15,
    output P16,
    output P17,
    output P18,
    output P19,
    output P20,
    output P21,
    output P22,
    output P23,
    output P24,
    output P25,
    output P26,
    output P27,
    output P28,
    output P29,
    output P30,
    output P31,
    output P32,
    output P33,
    output P34,
    output P35
);
    reg [17:0] a_r, b_r;
    reg [35:0] p_pipe, p_out;
    always @(posedge CLK0) begin
        if (CE0) begin
            a_r <= {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0};
            b_r <= {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0};
            p_pipe <= {18'b0, a_r} * {18'b0, b_r};
            p_out <= p_pipe;
        end
    end
    assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0} = p_out;
endmodule
/* verilator lint_on DECLFILENAME */
/* verilator lint_on UNUSEDPARAM */
/* verilator lint_on UNUSEDSIGNAL */
