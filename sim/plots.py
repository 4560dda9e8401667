"""The pictures: fragment ownership (``tcore plot layout``), accumulation error vs K
(``tcore plot accumulation``), Hopper's FP8 accumulation (``tcore plot fp8-accumulation``) and
the 2:4 sparse GEMM against the dense one (``tcore plot sparse``).
matplotlib is an optional extra (``pip install -e .[plot]``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ownership", "plot_layout", "accumulation_errors", "plot_accumulation", "ACC_KS",
           "fp8_accumulation_errors", "plot_fp8_accumulation", "FP8_KS", "FP8_METHODS",
           "sparse_errors", "plot_sparse", "SPARSE_KS"]

ACC_KS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
SPARSE_KS = [2 ** i for i in range(5, 13)]       # 32 .. 4096
FP8_KS = [2 ** i for i in range(5, 15)]          # 32 .. 16384
#: The three computations of the FP8 picture: golden.matmul arguments on (E4M3 or FP16) inputs.
FP8_METHODS = {
    "FP8 wgmma chain (13-bit accumulator)": ("fp8", {"instr": "wgmma"}),
    "FP8, promoted to FP32 every 128 of K": ("fp8", {"instr": "wgmma", "promote": 128}),
    "the same values as FP16, FP32 accumulate": ("fp16", {}),
}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("plots need matplotlib: pip install -e '.[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def ownership(layout: dict, heading: str):
    """(lane, slot) of each element of the 16x16 matrix, in matrix coordinates (row, column),
    from a ``tcore layout`` map.  Slots 8..15 of matrix_a/matrix_b repeat 0..7 and are skipped."""
    lane_of = np.full((16, 16), -1)
    slot_of = np.full((16, 16), -1)
    col_major = "col_major" in heading
    for lane, slots in enumerate(layout[heading]):
        for slot, idx in enumerate(slots[:8]):
            r, c = (idx % 16, idx // 16) if col_major else (idx // 16, idx % 16)
            lane_of[r, c], slot_of[r, c] = lane, slot
    return lane_of, slot_of


def plot_layout(layout: dict, path: str):
    """Six panels, one per fragment kind and layout: each element coloured by the lane that holds
    it and labelled with the lane and slot (``lane.slot``)."""
    plt = _pyplot()
    from matplotlib.colors import ListedColormap

    cmap = ListedColormap(plt.get_cmap("tab20").colors + plt.get_cmap("tab20b").colors[:12])
    fig, axes = plt.subplots(2, 3, figsize=(19, 13))
    names = {"matrix_a": ("A", "row m", "column k"), "matrix_b": ("B", "row k", "column n"),
             "accumulator": ("C / D", "row m", "column n")}
    order = ["matrix_a row_major", "matrix_b row_major", "accumulator mem_row_major",
             "matrix_a col_major", "matrix_b col_major", "accumulator mem_col_major"]
    for ax, heading in zip(axes.flat, order):
        lane_of, slot_of = ownership(layout, heading)
        ax.imshow(lane_of, cmap=cmap, vmin=-0.5, vmax=31.5)
        for r in range(16):
            for c in range(16):
                ax.text(c, r, f"{lane_of[r, c]}.{slot_of[r, c]}", ha="center", va="center", fontsize=5.5)
        kind, layout_name = heading.split(" ")
        title, ylabel, xlabel = names[kind]
        ax.set_title(f"{title}: {kind} loaded {layout_name}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_xticks(range(0, 16, 4))
        ax.set_yticks(range(0, 16, 4))
    fig.suptitle("m16n16k16 WMMA fragments as the RTL fragment bank holds them (equal to the H200's):"
                 " element labelled lane.slot, coloured by lane", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.97), h_pad=3)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def accumulation_errors(ks=ACC_KS, m: int = 32, n: int = 32, seed: int = 1):
    """Relative error (Frobenius, vs float64) of FP16-input GEMMs with FP16 and with FP32
    accumulation, through the golden (H200-exact) matmulT, for each K, on two input
    distributions: uniform [0, 1) (sums grow with K) and standard normal (they cancel).

    Returns ``{distribution: {"fp16": [...], "fp32": [...]}}`` in the order of ``ks``.
    """
    from tcore.golden.formats import to_float
    from tcore.golden.gemm import matmul_t

    rng = np.random.default_rng(seed)
    out = {}
    for dist in ("uniform [0,1)", "normal"):
        errs = {"fp16": [], "fp32": []}
        for k in ks:
            draw = rng.random if dist.startswith("uniform") else rng.standard_normal
            a = draw((m, k)).astype(np.float16)
            b = draw((k, n)).astype(np.float16)
            exact = a.astype(np.float64) @ b.astype(np.float64)
            for acc in ("fp16", "fp32"):
                d = to_float(matmul_t(a.view(np.uint16), b.view(np.uint16), out_fmt=acc), acc)
                errs[acc].append(float(np.linalg.norm(d - exact) / np.linalg.norm(exact)))
        out[dist] = errs
    return out


def plot_accumulation(errors: dict, path: str, ks=ACC_KS):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    styles = {"uniform [0,1)": "-", "normal": "--"}
    for dist, errs in errors.items():
        for acc, colour in (("fp16", "tab:red"), ("fp32", "tab:blue")):
            ax.loglog(ks, errs[acc], styles[dist], marker="o", color=colour,
                      label=f"{acc.upper()} accumulate, {dist} inputs")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("K (inner dimension)")
    ax.set_ylabel("relative error vs float64 (Frobenius)")
    ax.set_title("FP16-input GEMM on the H200 tensor core (golden model): FP16 vs FP32 accumulation")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fp8_accumulation_errors(ks=FP8_KS, m: int = 64, n: int = 64, seed: int = 1):
    """Median relative error (over outputs, vs the float64 product) of FP8 GEMMs with C = 0.

    Inputs: N(0, 1) and U[0.5, 1.5] draws rounded to E4M3.  For each K and each of
    :data:`FP8_METHODS`, through the silicon-exact golden model: the plain wgmma chain (K/32
    steps, each cut to 13 fraction bits), DeepSeek-V3's promotion (each 128-wide chunk of K a
    wgmma chain from zero, the chunk results added into FP32 with round-to-nearest-even, as
    cuBLASLt does by default), and the same values as FP16 inputs (exact in FP16) through the
    FP16 -> FP32 chain.  Returns ``{distribution: {method: [...]}}`` in the order of ``ks``.
    """
    import ml_dtypes
    from tcore.golden import matmul

    rng = np.random.default_rng(seed)
    out = {}
    for dist in ("normal", "uniform [0.5,1.5]"):
        errs = {name: [] for name in FP8_METHODS}
        for k in ks:
            def draw(shape):
                x = rng.standard_normal(shape) if dist == "normal" else rng.uniform(0.5, 1.5, shape)
                return x.astype(ml_dtypes.float8_e4m3fn)
            a8, b8 = draw((m, k)), draw((k, n))
            exact = a8.astype(np.float64) @ b8.astype(np.float64)
            nz = exact != 0
            for name, (kind, kw) in FP8_METHODS.items():
                a, b = (a8, b8) if kind == "fp8" else (a8.astype(np.float16), b8.astype(np.float16))
                d = matmul(a, b, **kw).astype(np.float64)
                errs[name].append(float(np.median(np.abs(d - exact)[nz] / np.abs(exact[nz]))))
        out[dist] = errs
    return out


def plot_fp8_accumulation(errors: dict, path: str, ks=FP8_KS):
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), sharey=True)
    colours = ("tab:red", "tab:orange", "tab:blue")
    floor = 1e-9            # a median error of 0 (exact) is drawn on this line
    for ax, (dist, errs) in zip(axes, errors.items()):
        for (name, e), colour in zip(errs.items(), colours):
            e = np.asarray(e)
            ax.loglog(ks, np.maximum(e, floor), marker="o", color=colour, label=name)
            ax.plot(np.asarray(ks)[e == 0], np.full((e == 0).sum(), floor), "o", color=colour,
                    markerfacecolor="white")
        ax.axhline(floor, color="grey", lw=0.8, ls=":")
        ax.text(ks[0], floor * 1.4, "median error 0 (exact): hollow markers", fontsize=8, color="grey")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("K (inner dimension)")
        ax.set_title(f"E4M3 inputs: {dist}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("median relative error vs float64")
    axes[0].legend(fontsize=8)
    fig.suptitle("64 x 64 x K FP8 GEMMs on the H200 tensor core (golden model): the 13-bit FP8 "
                 "accumulator, DeepSeek-V3's promotion, FP16 inputs", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def sparse_errors(ks=SPARSE_KS, m: int = 64, n: int = 64, seed: int = 1):
    """Relative error (Frobenius, vs the float64 product of the same pruned inputs) of FP16-input
    GEMMs with FP32 output: the 2:4 sparse GEMM (:func:`tcore.golden.sparse.cslt_mm`: one fused step
    per 32 logical K, 16 stored products) and the dense K/16 chain (:func:`tcore.golden.matmul`) on the
    same pruned A, for each K, on uniform [0, 1) and standard normal draws (A pruned by
    :func:`tcore.golden.sparse.prune_24`).  Both see the same pruned A, so the difference is only the
    accumulation: the sparse step fuses two dense steps' worth of K under one alignment.

    Returns ``{distribution: {"sparse": [...], "dense": [...]}}`` in the order of ``ks``.
    """
    from tcore.golden import matmul
    from tcore.golden.sparse import compress, cslt_mm, prune_24

    rng = np.random.default_rng(seed)
    out = {}
    for dist in ("uniform [0,1)", "normal"):
        errs = {"sparse": [], "dense": []}
        for k in ks:
            draw = rng.random if dist.startswith("uniform") else rng.standard_normal
            a = prune_24(draw((m, k)).astype(np.float16))
            b = draw((k, n)).astype(np.float16)
            exact = a.astype(np.float64) @ b.astype(np.float64)
            sp = compress(a.view(np.uint16), "fp16")
            d_sp = cslt_mm(sp, b.view(np.uint16), in_fmt="fp16", out_fmt="fp32").view(np.float32)
            d_dn = matmul(a, b, engine="numpy")
            for name, d in (("sparse", d_sp), ("dense", d_dn)):
                errs[name].append(float(np.linalg.norm(d.astype(np.float64) - exact) /
                                        np.linalg.norm(exact)))
        out[dist] = errs
    return out


def plot_sparse(errors: dict, path: str, ks=SPARSE_KS):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    styles = {"uniform [0,1)": "-", "normal": "--"}
    labels = {"sparse": "2:4 sparse GEMM (mma.sp k32 steps)",
              "dense": "dense chain (k16 steps) on the same pruned A"}
    for dist, errs in errors.items():
        for name, colour in (("sparse", "tab:green"), ("dense", "tab:blue")):
            ax.loglog(ks, errs[name], styles[dist], marker="o", color=colour,
                      label=f"{labels[name]}, {dist} inputs")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("K (logical inner dimension)")
    ax.set_ylabel("relative error vs float64 (Frobenius)")
    ax.set_title("FP16-input GEMM, FP32 output, H200 (golden model): 2:4 sparse vs dense", fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
