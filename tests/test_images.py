"""Port words and memory images are packed from the RTL's own layouts (host.images): the
positions follow the Struct, and a value that does not fit or a misspelt field is an error."""

import pytest
from amaranth.lib import data

from tcore.rtl.gemm import GemmConfig
from tcore.rtl.regmap import register
from tcore.rtl.wmma import WmmaCmd
from tcore.host.images import cfg_word, pack_struct, unpack_struct
from tcore.host.wmma_model import CMD_BITS, cmd_word, resp_fields


def test_struct_words_follow_the_rtl_layout():
    lay = data.Layout.cast(WmmaCmd)
    word = cmd_word(op=2, tag=0xA5, addr=0x1234)
    assert word == (2 << lay["op"].offset) | (0xA5 << lay["tag"].offset) | (0x1234 << lay["addr"].offset)
    assert CMD_BITS == lay.size
    assert unpack_struct(WmmaCmd, word)["tag"] == 0xA5
    # The fields' own widths: the largest value fits, one more does not.
    steps = data.Layout.cast(GemmConfig)["steps"].width
    cfg_word(steps=(1 << steps) - 1)
    with pytest.raises(ValueError, match="does not fit"):
        cfg_word(steps=1 << steps)
    with pytest.raises(ValueError, match="no field 'step'"):
        pack_struct(GemmConfig, step=1)
    assert resp_fields(0x7FF) == {"tag": 0xFF, "op": 3, "error": 1}


def test_register_fields_pack_from_the_map():
    fmt = register("FORMAT")
    w = fmt.pack(in_fmt=1, acc_f16=1, b_alt=1, c_given=1, sat=1)
    assert fmt.unpack(w) == {"in_fmt": 1, "acc_f16": 1, "b_alt": 1, "c_given": 1, "sat": 1}
    assert w == sum(1 << f.lsb for f in fmt.fields) == 0x331
    with pytest.raises(ValueError, match="no field"):
        fmt.pack(bf16=1)
    with pytest.raises(ValueError, match="does not fit"):
        fmt.pack(in_fmt=8)
