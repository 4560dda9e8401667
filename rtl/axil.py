"""AXI4-Lite: the bus signature and a register block built from :mod:`tcore.rtl.regmap`.

The slave follows the AXI4 rules (ARM IHI 0022, AXI4-Lite): a source holds VALID and its
payload until READY; a slave may wait for VALID before READY; write address and write data are
independent channels; every accepted write gets one B response and every accepted read one R
response, in order.
"""

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .regmap import ADDR_BITS, REGISTERS, Access

__all__ = ["RESP_OKAY", "RESP_SLVERR", "RESP_DECERR", "AxiLiteSignature", "AxiLiteRegs",
           "AxiLiteRegsTop", "field_port", "flat_members", "connect_flat"]

RESP_OKAY, RESP_SLVERR, RESP_DECERR = 0, 2, 3


class AxiLiteSignature(wiring.Signature):
    """An AXI4-Lite interface, from the master's side (``Out`` = driven by the master); a slave
    takes ``In(AxiLiteSignature(...))``.  32-bit data, ``addr_width``-bit byte addresses."""

    def __init__(self, addr_width: int):
        if addr_width < 2:
            raise ValueError(f"Address width must be at least 2, not {addr_width!r}")
        self._addr_width = addr_width
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })

    @property
    def addr_width(self):
        return self._addr_width


def field_port(reg, field) -> str:
    """The port name of a field: ``<register>`` for a whole-word field, else
    ``<register>_<field>`` (lower case)."""
    name = reg.name.lower()
    return name if field.name == "value" and len(reg.fields) == 1 else f"{name}_{field.name}"


class AxiLiteRegs(wiring.Component):
    """The register map of :mod:`tcore.rtl.regmap` behind an AXI4-Lite slave.

    Ports, besides ``bus``: for each field (named by :func:`field_port`) an ``Out`` holding an
    RW field's value or a W1S field's one-clock pulse, an ``In`` for an RO field, and for a
    W1C field an ``Out`` (the sticky bit) and an ``In`` ``<port>_set`` that sets it.  Constant
    fields (ID, VERSION, CAPS) have no port: ``constants`` overrides their defaults,
    ``{"CAPS": {"warps": 2}}``.

    A read takes 1 clock from the accepted address to RVALID; a write is applied (and BVALID
    raised) the clock after both its address and data are accepted.  Unmapped addresses get
    SLVERR; writes to read-only fields are ignored; WSTRB selects the bytes written.
    ``clear_w1c`` names a W1S field, ``(register, field)``, whose pulse also clears every W1C
    bit (a soft reset).

    Parameters
    ----------
    registers : tuple of :class:`tcore.rtl.regmap.Register`
    constants : dict
    clear_w1c : tuple or None
    """

    def __init__(self, registers=REGISTERS, *, constants=None, clear_w1c=("CTRL", "soft_reset")):
        self._regs = tuple(registers)
        self._consts = {}
        constants = dict(constants or {})
        members = {"bus": In(AxiLiteSignature(ADDR_BITS + 2))}
        for r in self._regs:
            for f in r.fields:
                port = field_port(r, f)
                if f.const:
                    value = constants.get(r.name, {}).pop(f.name, f.reset)
                    if not 0 <= value < (1 << f.width):
                        raise ValueError(f"{r.name}.{f.name} = {value!r} does not fit {f.width} bits")
                    self._consts[r.name, f.name] = value
                elif f.access is Access.RO:
                    members[port] = In(f.width)
                elif f.access is Access.W1C:
                    members[port] = Out(f.width)
                    members[f"{port}_set"] = In(f.width)
                else:
                    members[port] = Out(f.width, init=f.reset)
            left = constants.pop(r.name, None)
            if left:
                raise ValueError(f"{r.name} has no build-time constant field {sorted(left)}")
        if constants:
            raise ValueError(f"No registers {sorted(constants)}")
        self._clear = clear_w1c
        super().__init__(members)

    def constant(self, reg: str, field: str) -> int:
        return self._consts[reg, field]

    def elaborate(self, platform):
        m = Module()
        bus = self.bus

        # ---- write channel: hold AW and W until both are in, then apply and respond -------
        aw_full, aw_addr = Signal(), Signal(ADDR_BITS)
        w_full, w_data, w_strb = Signal(), Signal(32), Signal(4)
        m.d.comb += [bus.awready.eq(~aw_full), bus.wready.eq(~w_full)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_full.eq(1), aw_addr.eq(bus.awaddr[2:])]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        do_write = Signal()
        m.d.comb += do_write.eq(aw_full & w_full & (~bus.bvalid | bus.bready))
        with m.If(do_write):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), bus.bvalid.eq(1)]
        with m.Elif(bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        bit_en = Cat(*(w_strb[i // 8] for i in range(32)))    # WSTRB per data bit
        written = Signal(32)          # the bits a write sets to 1, of the addressed register
        m.d.comb += written.eq(w_data & bit_en)
        hit_w = {r.name: Signal(name=f"w_{r.name.lower()}") for r in self._regs}
        for r in self._regs:
            m.d.comb += hit_w[r.name].eq(do_write & (aw_addr == r.offset // 4))
        with m.If(do_write):
            m.d.sync += bus.bresp.eq(RESP_SLVERR)
            for r in self._regs:
                with m.If(aw_addr == r.offset // 4):
                    m.d.sync += bus.bresp.eq(RESP_OKAY)

        read_value = self._fields(m, hit_w, w_data, bit_en, written)

        # ---- read channel: one read in flight ----------------------------------------------
        m.d.comb += bus.arready.eq(~bus.rvalid)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += bus.rvalid.eq(1)
            with m.Switch(bus.araddr[2:]):
                for idx, word in read_value.items():
                    with m.Case(idx):
                        m.d.sync += [bus.rdata.eq(word), bus.rresp.eq(RESP_OKAY)]
                with m.Default():                   # an unmapped address
                    m.d.sync += [bus.rdata.eq(0), bus.rresp.eq(RESP_SLVERR)]
        with m.Elif(bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        return m

    def _fields(self, m, hit_w, w_data, bit_en, written):
        """Each field's register, pulse or sticky bit, written by the registers' write hits;
        returns each register's read value by word offset."""
        clear = None
        if self._clear is not None:
            rname, fname = self._clear
            reg = next(r for r in self._regs if r.name == rname)
            fld = next(f for f in reg.fields if f.name == fname)
            clear = hit_w[rname] & written[fld.lsb]
        read_value = {}
        for r in self._regs:
            parts = []
            for f in r.fields:
                port = field_port(r, f)
                sl = slice(f.lsb, f.lsb + f.width)
                if f.access is Access.RO and (r.name, f.name) in self._consts:
                    parts.append((f, C(self._consts[r.name, f.name], f.width)))
                elif f.access is Access.RO:
                    parts.append((f, getattr(self, port)))
                elif f.access is Access.RW:
                    reg_sig = getattr(self, port)
                    with m.If(hit_w[r.name]):
                        keep = reg_sig & ~bit_en[sl]
                        m.d.sync += reg_sig.eq(keep | (w_data[sl] & bit_en[sl]))
                    parts.append((f, reg_sig))
                elif f.access is Access.W1S:
                    pulse = getattr(self, port)
                    m.d.sync += pulse.eq(Mux(hit_w[r.name], written[sl], 0))
                else:                                   # W1C: set by the engine wins over a clear
                    bit, set_ = getattr(self, port), getattr(self, f"{port}_set")
                    cleared = bit & ~Mux(hit_w[r.name], written[sl], 0)
                    if clear is not None:
                        cleared = Mux(clear, 0, cleared)
                    m.d.sync += bit.eq(cleared | set_)
                    parts.append((f, bit))
            word = Signal(32, name=f"r_{r.name.lower()}")
            for f, v in parts:
                m.d.comb += word[f.lsb:f.lsb + f.width].eq(v)
            read_value[r.offset // 4] = word
        return read_value


def flat_members(prefix: str, member) -> dict:
    """The ports of an interface member as flat top-level members ``<prefix>_<name>`` (the
    names Vivado and LiteX infer AXI interfaces from), with the member's own flows."""
    # ``member.signature`` is flipped for an ``In`` member: its flows are the ports'.
    return {f"{prefix}_{name}": sub for name, sub in member.signature.members.items()}


def connect_flat(m, outer, prefix: str, inner, member):
    """Connect the flat ports of :func:`flat_members` on ``outer`` to interface ``inner``."""
    for name, sub in member.signature.members.items():
        o, i = getattr(outer, f"{prefix}_{name}"), getattr(inner, name)
        m.d.comb += (o.eq(i) if sub.flow == Out else i.eq(o))


class AxiLiteRegsTop(wiring.Component):
    """The register block alone as a top-level design (``axilregs``): its AXI4-Lite slave on
    ports named as Vivado and LiteX expect (``s_axil_awaddr`` ...), the field ports as in
    :class:`AxiLiteRegs`.  For the benches and for a user's own SoC glue."""

    def __init__(self, **kw):
        self._regs = AxiLiteRegs(**kw)
        members = {}
        for name, member in self._regs.signature.members.items():
            members.update(flat_members("s_axil", member) if name == "bus" else {name: member})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = self._regs
        for name, member in regs.signature.members.items():
            if name == "bus":
                connect_flat(m, self, "s_axil", regs.bus, member)
            elif member.flow == In:
                m.d.comb += getattr(regs, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(regs, name))
        return m
