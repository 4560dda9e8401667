"""``tcore regs``: the GEMM accelerator's register map (``tcore.rtl.regmap``)."""

from __future__ import annotations

from pathlib import Path

from .common import CliError, EXIT_OK

NAME = "regs"
HELP = "the GEMM accelerator's register map (Markdown, or a C header)"


def add_arguments(parser):
    parser.add_argument("-o", default=None, metavar="FILE", help="write it here (else stdout)")
    parser.add_argument("--c-header", action="store_true",
                        help="C macros and enums (tcore_regs.h, as in sw/include/) instead of Markdown")


def run(args) -> int:
    from tcore.rtl.regmap import c_header, markdown

    text = c_header() if args.c_header else markdown() + "\n"
    if args.o is None:
        print(text, end="")
        return EXIT_OK
    out = Path(args.o)
    if not out.parent.is_dir():
        raise CliError(f"-o {out}: no such folder {out.parent}")
    out.write_text(text)
    print(f"wrote {out}")
    return EXIT_OK
