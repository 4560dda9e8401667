"""The pictures: fragment ownership (``tcore plot layout``) and accumulation error vs K
(``tcore plot accumulation``).  matplotlib is an optional extra (``pip install -e .[plot]``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ownership", "plot_layout", "accumulation_errors", "plot_accumulation", "ACC_KS"]

ACC_KS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]


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
    from golden.formats import to_float
    from golden.gemm import matmul_t

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
