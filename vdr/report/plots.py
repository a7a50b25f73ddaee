"""The report's figures, drawn with matplotlib's object API (``matplotlib.figure.Figure`` + the Agg
canvas: no pyplot state, no GUI backend, safe in threads and notebooks) and returned as PNG bytes.

matplotlib is imported inside the functions, so ``import vdr.report`` stays light.
"""

from __future__ import annotations

import io

import numpy as np

__all__ = ["metric_bars", "delta_distribution", "length_vs_delta", "hole_bars", "png_bytes", "PALETTE"]

# Okabe-Ito colour-blind safe palette (variant i gets PALETTE[i % len]).
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _change_panels(metric: str, n: int):
    """A figure of ``n`` side-by-side subplots sharing the y axis, "change in ``metric``", each with a
    zero line; (figure, array of the ``n`` axes)."""
    fig = _figure(max(4.0, 3.6 * n), 3.4)
    axes = fig.subplots(1, n, sharey=True, squeeze=False)[0]
    for ax in axes:
        ax.axhline(0, color="#888888", lw=0.8)
    axes[0].set_ylabel(f"change in {metric}")
    return fig, axes


def png_bytes(fig) -> bytes:
    """Render ``fig`` to PNG (Agg, 100 dpi) with a palette of at most 256 colours (median cut, no
    dithering: a third of the RGBA file's size, which keeps the report of the bundled sample under
    0.6 MB). No metadata chunks (no software name or URL)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    with Image.open(io.BytesIO(buf.getvalue())) as im:
        pal = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    pal.save(out, format="PNG", optimize=True)
    return out.getvalue()


def metric_bars(title: str, metrics: list[str], variants: list[str], means: np.ndarray, ci: np.ndarray) -> bytes:
    """Grouped bars: one group per metric, one bar per variant, with 95% interval whiskers.

    Args:
        title: figure title (the backend).
        metrics: metric names, length ``M``.
        variants: variant names, length ``V``.
        means: shape ``(V, M)``, mean per variant and metric (in [0, 1]).
        ci: shape ``(V, M, 2)``, ``(low, high)`` of each mean's 95% bootstrap interval.

    Returns:
        PNG bytes.
    """
    V, M = means.shape
    fig = _figure(max(5.5, 1.6 * M * max(1, V) / 2 + 2), 3.4)
    ax = fig.add_subplot()
    width = 0.8 / max(V, 1)
    x = np.arange(M)
    for i, v in enumerate(variants):
        pos = x - 0.4 + width * (i + 0.5)
        err = np.vstack([means[i] - ci[i, :, 0], ci[i, :, 1] - means[i]]).clip(min=0)
        ax.bar(pos, means[i], width * 0.92, yerr=err, capsize=3, label=v, color=PALETTE[i % len(PALETTE)],
               error_kw={"elinewidth": 1, "ecolor": "#333333"})
        for p_, m_ in zip(pos, means[i]):
            ax.text(p_, 0.01, f"{m_:.2f}", ha="center", va="bottom", fontsize=7, rotation=90, color="white")
    ax.set_xticks(x, metrics)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean over queries")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return png_bytes(fig)


def delta_distribution(metric: str, panels: list[tuple[str, list[str], list[np.ndarray]]]) -> bytes:
    """Per-query changes (rewritten - original) per backend: a box plot per rewrite variant with every
    query drawn as a jittered point (seeded jitter, so the PNG is reproducible).

    Args:
        metric: the metric whose change is shown (y axis, in [-1, 1]).
        panels: ``[(backend, variant names, [deltas of each variant, shape (n,)])]``, one subplot each.

    Returns:
        PNG bytes.
    """
    fig, axes = _change_panels(metric, len(panels))
    rng = np.random.default_rng(0)
    for ax, (backend, names, deltas) in zip(axes, panels):
        ax.boxplot(deltas, tick_labels=names, widths=0.5, showfliers=False)
        for i, d in enumerate(deltas):
            xs = i + 1 + rng.uniform(-0.15, 0.15, size=len(d))
            ax.scatter(xs, d, s=10, alpha=0.6, color=PALETTE[(i + 1) % len(PALETTE)], edgecolors="none")
        ax.set_title(backend)
        ax.set_ylim(-1.05, 1.05)
        ax.grid(axis="y", alpha=0.3)
        ax.tick_params(axis="x", labelsize=8, labelrotation=15)
    return png_bytes(fig)


def length_vs_delta(metric: str, panels: list[tuple[str, list[str], list[np.ndarray], list[np.ndarray]]]) -> bytes:
    """Rewrite length (whitespace tokens) against the per-query change of ``metric``, one subplot per
    backend, one colour per rewrite variant (seeded vertical jitter of +-0.01 to separate ties).

    Args:
        metric: the metric whose change is on the y axis.
        panels: ``[(backend, variant names, [lengths, shape (n,)], [deltas, shape (n,)])]``.

    Returns:
        PNG bytes.
    """
    fig, axes = _change_panels(metric, len(panels))
    rng = np.random.default_rng(0)
    for ax, (backend, names, lengths, deltas) in zip(axes, panels):
        for i, (name, x, y) in enumerate(zip(names, lengths, deltas)):
            ax.scatter(x, y + rng.uniform(-0.01, 0.01, size=len(y)), s=12, alpha=0.7, label=name,
                       color=PALETTE[(i + 1) % len(PALETTE)], edgecolors="none")
        ax.set_title(backend)
        ax.set_xlabel("rewrite length (whitespace tokens)")
        ax.set_ylim(-1.05, 1.05)
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=8, frameon=False)
    return png_bytes(fig)


def hole_bars(metric: str, backends: list[str], variants: list[str], rates: np.ndarray) -> bytes:
    """Grouped bars of the hole rate: one group per backend, one bar per variant.

    Args:
        metric: e.g. ``"hole@3"``.
        backends: length ``B``. variants: length ``V``.
        rates: shape ``(B, V)``, the mean hole rate (NaN where a run is absent: no bar).

    Returns:
        PNG bytes.
    """
    B, V = rates.shape
    fig = _figure(max(5.0, 1.4 * B * max(V, 1) / 2 + 2), 3.0)
    ax = fig.add_subplot()
    width = 0.8 / max(V, 1)
    x = np.arange(B)
    for i, v in enumerate(variants):
        ax.bar(x - 0.4 + width * (i + 0.5), np.nan_to_num(rates[:, i]), width * 0.92, label=v, color=PALETTE[i % len(PALETTE)])
    ax.set_xticks(x, backends)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(f"{metric} (share unjudged)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return png_bytes(fig)
