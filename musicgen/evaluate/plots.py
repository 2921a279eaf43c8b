"""Matplotlib figures for the evaluation (Agg backend, fixed pixel sizes, atomic PNG writes).

Every function takes plain numbers (lists / numpy arrays), so the figures can be redrawn from the
JSON the evaluate commands write, and tests can check them without a model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from musicgen.io import atomic_path  # noqa: E402

DPI = 100
FIG_SIZE = (8.0, 5.0)  # inches: every figure here is 800 x 500 pixels


def save_figure(fig: plt.Figure, path: str | Path) -> Path:
    """Save as PNG at the fixed size (no tight bbox, so tests can rely on the pixel size)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI)
    plt.close(fig)
    return path


def _figure(n_panels: int = 1, max_cols: int = 4) -> tuple[plt.Figure, list[plt.Axes]]:
    cols = min(n_panels, max_cols)
    rows = math.ceil(n_panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=FIG_SIZE, dpi=DPI, squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat[:n_panels]


def plot_nll_curves(
    curves: Mapping[str, Sequence[float]],
    segment: int,
    train_len: int | None,
    path: str | Path,
    title: str = "per-position validation NLL",
) -> Path:
    """One line per model: mean NLL of each `segment`-token block, the training length marked."""
    fig, (ax,) = _figure()
    for label, values in curves.items():
        values = np.asarray(values, np.float64)
        x = (np.arange(len(values)) + 0.5) * segment
        ax.plot(x, values, marker="o", ms=3, label=label)
    if train_len:
        ax.axvline(train_len, color="0.4", ls="--", lw=1, label=f"training length {train_len}")
    ax.set_xlabel("position (tokens)")
    ax.set_ylabel(f"NLL (nats, mean per {segment} tokens)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_style_boxes(
    scores: Mapping[str, Sequence[Sequence[float]]],
    path: str | Path,
    title: str = "style similarity of the continuation to its source",
    reference: Mapping[str, Sequence[Sequence[float]]] | None = None,
) -> Path:
    """One panel per similarity; one box per time segment (each a list of scores); `reference`
    (the source's own continuation) is drawn as a dashed line of its per-segment means."""
    fig, axes = _figure(len(scores))
    for ax, (name, per_segment) in zip(axes, scores.items(), strict=True):
        data = [np.asarray([v for v in seg if np.isfinite(v)]) for seg in per_segment]
        ax.boxplot(data, showmeans=True)
        if reference is not None:
            ref = [np.nanmean(seg) if len(seg) else np.nan for seg in reference[name]]
            ax.plot(range(1, len(ref) + 1), ref, "k--", lw=1, label="real continuation")
            ax.legend(loc="lower left", fontsize=8)
        ax.set_xticks(range(1, len(data) + 1), [str(i + 1) for i in range(len(data))])
        ax.set_xlabel("segment of the continuation")
        ax.set_ylabel("cosine similarity")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(name.replace("_", "-"))
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_kernels(
    kernels: Mapping[str, np.ndarray],
    lags: np.ndarray,
    path: str | Path,
    title: str = "learned positional templates P_d(m - n)",
) -> Path:
    """One panel per head; each row of `kernels[label]` (features x lags) is one line."""
    fig, axes = _figure(len(kernels))
    for ax, (label, k) in zip(axes, kernels.items(), strict=True):
        k = np.atleast_2d(np.asarray(k, np.float64))
        for row in k:
            ax.plot(lags, row, lw=1)
        ax.axhline(0, color="0.6", lw=0.5)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("m - n (tokens)", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_attention(
    matrices: Mapping[str, np.ndarray],
    path: str | Path,
    title: str = "attention (rows sum to 1; colours clipped at the 99th percentile)",
) -> Path:
    """Heat maps of row-normalised attention matrices (query rows, key columns)."""
    fig, axes = _figure(len(matrices), max_cols=math.ceil(math.sqrt(len(matrices))))
    for ax, (label, a) in zip(axes, matrices.items(), strict=True):
        a = np.asarray(a, np.float64)
        positive = a[a > 0]
        # the first rows hold weights near 1; clip the colour scale so the rest stays visible
        vmax = float(np.quantile(positive, 0.99)) if positive.size else 1.0
        im = ax.imshow(a, cmap="magma", aspect="auto", interpolation="nearest", vmin=0, vmax=vmax)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("key position", fontsize=8)
        ax.set_ylabel("query position", fontsize=8)
        ax.tick_params(labelsize=7)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.02)
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_training_log(records: Sequence[Mapping], path: str | Path, title: str = "") -> Path:
    """Training loss (and learning rate) against steps, with validation losses as markers."""
    train = [r for r in records if r.get("kind") == "train" and "loss" in r]
    val = [r for r in records if r.get("kind") == "val" and "loss" in r]
    fig, (ax,) = _figure()
    if train:
        steps = np.array([r["step"] for r in train])
        loss = np.array([r["loss"] for r in train], np.float64)
        ax.plot(steps, loss, lw=0.8, alpha=0.5, label="train")
        if len(loss) >= 10:
            w = max(len(loss) // 20, 2)
            smooth = np.convolve(loss, np.ones(w) / w, mode="valid")
            ax.plot(steps[w - 1 :], smooth, lw=1.5, label=f"train (mean of {w})")
    if val:
        ax.plot([r["step"] for r in val], [r["loss"] for r in val], "o-", label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.grid(alpha=0.3)
    if any("lr" in r for r in train):
        ax2 = ax.twinx()
        ax2.plot(
            [r["step"] for r in train if "lr" in r],
            [r["lr"] for r in train if "lr" in r],
            color="0.5",
            lw=0.8,
            ls=":",
        )
        ax2.set_ylabel("learning rate (dotted)")
    ax.legend(fontsize=8)
    ax.set_title(title or "training log")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_music_stats(
    generated: Mapping[str, Sequence[float]],
    reference: Mapping[str, Sequence[float]] | None,
    path: str | Path,
    title: str = "music statistics",
) -> Path:
    """One panel per statistic: a box for the generated files, one for the reference."""
    fig, axes = _figure(len(generated))
    for ax, name in zip(axes, generated, strict=True):
        groups = [("generated", generated[name])]
        if reference is not None:
            groups.append(("reference", reference.get(name, [])))
        data = [np.asarray([v for v in vals if np.isfinite(v)]) for _, vals in groups]
        ax.boxplot(data)
        ax.set_xticks(range(1, len(groups) + 1), [g for g, _ in groups], fontsize=7)
        ax.set_title(name.replace("_", " "), fontsize=9)
        ax.tick_params(labelsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_run(run_dir: str | Path, out: str | Path) -> list[Path]:
    """`musicgen plot log`: a run's training curves (log.png) and, when validation logged them,
    the first and last per-position validation curves (log_segments.png)."""
    from musicgen.train.log import read_log

    records = read_log(run_dir)
    out = Path(out)
    written = [plot_training_log(records, out / "log.png", title=str(run_dir))]
    vals = [r for r in records if r.get("kind") == "val" and r.get("loss_per_segment")]
    if vals:
        seg = int(vals[-1].get("segment", 128))
        picks = [vals[0], vals[-1]] if len(vals) > 1 else vals
        curves = {
            f"step {r['step']}": [float("nan") if v is None else v for v in r["loss_per_segment"]]
            for r in picks
        }
        written.append(
            plot_nll_curves(
                curves,
                seg,
                vals[-1].get("crop_len"),
                out / "log_segments.png",
                title="validation NLL per position",
            )
        )
    return written
