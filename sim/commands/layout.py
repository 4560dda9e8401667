"""``tcore layout``: the WMMA fragment layout of the RTL (``tcore.sim.layout``)."""

from __future__ import annotations

import json

from .common import EXIT_OK

NAME = "layout"
HELP = "the WMMA fragment layout (lane/slot map) of the RTL"


def add_arguments(parser):
    parser.add_argument("--json", action="store_true", help="one JSON object keyed by fragment kind")
    parser.add_argument("--shape", choices=["m16n16k16", "m32n8k16", "m8n32k16"],
                        help="the shape's sections, as h200_wmma_layouts_all_shapes.txt has them "
                             "(default: the m16n16k16 sections of h200_wmma_layout.txt)")


def run(args) -> int:
    from tcore.sim.layout import NOTE, rtl_layout

    lay = rtl_layout(args.shape)
    if args.json:
        print(json.dumps(lay))
    else:
        note = NOTE[None if args.shape is None else "shape"]
        for heading, lanes in lay.items():
            print(f"# {heading} num_elements={len(lanes[0])} {note}")
            for lane, slots in enumerate(lanes):
                print(f"lane {lane:2d}: " + " ".join(f"{v:3d}" for v in slots))
    return EXIT_OK
