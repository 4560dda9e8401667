/* start.S: reset entry of the demo firmware (RV32IM, bare metal). */
    .section .text.start
    .global _start
_start:
    la   sp, __stack_top
    la   t0, __bss_start          /* zero .bss */
    la   t1, __bss_end
1:  bgeu t0, t1, 2f
    sw   zero, 0(t0)
    addi t0, t0, 4
    j    1b
2:  call main
    li   t0, 0x20000004           /* the simulation's exit port: the return value */
    sw   a0, 0(t0)
3:  j    3b
