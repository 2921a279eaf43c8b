"""Looking inside a model (`musicgen plot kernels|attention`): positional templates, attention maps.

`attention_maps` forms the N x N matrix explicitly from the layer's own q, k projection
(`CausalSelfAttention.project`, SPE codes included) and feature map, so it cannot drift from
the attention the model computes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from musicgen.errors import MusicgenError


def positional_kernels(model: torch.nn.Module, lags: np.ndarray, layer: int = 0) -> np.ndarray:
    """The learned P_d(m - n) of `layer` at integer `lags`: (L, H, D).

    sineSPE: the closed form from f, theta, lambda; convSPE: the filters' cross-correlation;
    with gates (1 - delta) P + delta, which is what the gated codes estimate.
    """
    spes = getattr(model, "spe", None)
    blocks = getattr(model, "blocks", None)
    if not spes or blocks is None:
        pe = getattr(getattr(model, "cfg", None), "pe", "?")
        raise MusicgenError(
            f"checkpoint: model uses pe '{pe}', which has no learned "
            "positional kernel (only sine_spe and conv_spe do)"
        )
    if not 0 <= layer < len(blocks):
        raise MusicgenError(f"layer: {layer} is not a layer (0..{len(blocks) - 1})")
    spe = spes[0] if len(spes) == 1 else spes[layer]
    with torch.no_grad():
        kern = spe.kernel(torch.as_tensor(lags, dtype=torch.long)).float().cpu()  # (L, H, D)
        gate = getattr(blocks[layer].attn, "gate", None)
        if gate is not None:
            delta = torch.sigmoid(gate.float()).cpu()  # (H, D)
            kern = (1 - delta) * kern + delta
    return kern.numpy()


def _check_index(what: str, values: list[int], n: int) -> None:
    bad = [v for v in values if not 0 <= v < n]
    if bad:
        raise MusicgenError(f"{what}: {bad[0]} is out of range (0..{n - 1})")


@torch.no_grad()
def attention_maps(
    model: torch.nn.Module,
    ids: Sequence[int],
    layers: list[int],
    heads: list[int],
    seed: int = 0,
) -> dict[tuple[int, int], np.ndarray]:
    """Row-normalised causal attention phi(q^).phi(k^) of chosen (layer, head)s: N x N each.

    Formed explicitly (O(N^2), display only) from each layer's input, caught with a forward
    pre-hook on the attention module, through the layer's own `project` (q, k and SPE codes) and
    feature map. The SPE noise is drawn from `seed`.
    """
    blocks = model.blocks
    _check_index("layer", layers, len(blocks))
    _check_index("head", heads, blocks[0].attn.n_heads)
    local = [lay for lay in layers if not hasattr(blocks[lay].attn, "features")]
    if local:
        raise MusicgenError(
            f"layer: {local[0]} is a windowed softmax layer (model.local_layers), not a "
            "linear-attention one; choose another layer"
        )
    maps: dict[tuple[int, int], np.ndarray] = {}

    def hook_for(layer: int):
        def hook(attn, args):
            x, codes = args[0], args[1] if len(args) > 1 else None
            n = x.shape[1]
            q, k, _ = attn.project(attn.qkv(x), codes)  # the layer's own path: (B, H, N, .)
            phi_q = attn.features.query(q)  # (B, H, N, M)
            phi_k, _ = attn.features.key(k)  # one shift per key set: it cancels per row below
            a = (phi_q @ phi_k.transpose(-1, -2))[0]  # (H, N, N)
            a = a.masked_fill(~torch.ones(n, n, dtype=torch.bool, device=a.device).tril(), 0.0)
            a = a / a.sum(-1, keepdim=True).clamp_min(1e-30)
            for h in heads:
                maps[(layer, h)] = a[h].cpu().numpy()

        return hook

    handles = [blocks[lay].attn.register_forward_pre_hook(hook_for(lay)) for lay in layers]
    was_training = model.training
    model.eval()
    try:
        torch.manual_seed(seed)
        device = next(model.parameters()).device
        model(torch.as_tensor(list(ids), dtype=torch.long, device=device)[None])
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return maps


def kernel_figure(
    checkpoint: str | Path,
    out: str | Path,
    layer: int = 0,
    heads: list[int] | None = None,
    features: int = 4,
    max_lag: int | None = None,
) -> Path:
    """`musicgen plot kernels`: the learned P_d(m - n) of chosen heads as kernels.png, every
    number in kernels.json; returns the PNG."""
    from musicgen.checkpoint import load_checkpoint
    from musicgen.evaluate.common import write_json
    from musicgen.evaluate.plots import plot_kernels

    loaded = load_checkpoint(checkpoint)
    m = loaded.config.model
    max_lag = max_lag or (m.kernel_size if m.pe == "conv_spe" else 256)
    lags = np.arange(-max_lag, max_lag + 1)
    kern = positional_kernels(loaded.model, lags, layer)  # (L, H, D)
    heads = heads if heads else list(range(min(m.n_heads, 8)))
    bad = [h for h in heads if not 0 <= h < kern.shape[1]]
    if bad:
        raise MusicgenError(f"heads: {bad[0]} is out of range (0..{kern.shape[1] - 1})")
    feats = list(range(min(features, kern.shape[2])))
    panels = {f"head {h}": kern[:, h, feats].T for h in heads}
    out = Path(out)
    gate = " (gated)" if m.gated else ""
    png = plot_kernels(
        panels,
        lags,
        out / "kernels.png",
        title=f"{m.pe}{gate}: P_d(m - n), layer {layer}, features {feats}",
    )
    write_json(
        out / "kernels.json",
        {
            "checkpoint": checkpoint,
            "pe": m.pe,
            "layer": layer,
            "lags": lags,
            "heads": heads,
            "features": feats,
            "kernels": dict(panels),
        },
    )
    return png


def attention_figure(
    checkpoint: str | Path,
    midi: str | Path,
    out: str | Path,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
    tokens: int = 256,
    seed: int = 0,
) -> Path:
    """`musicgen plot attention`: attention of chosen layers / heads on the first `tokens`
    ids of a MIDI file, as attention.png (default: first and last layer, heads 0 and 1)."""
    from musicgen.checkpoint import load_checkpoint
    from musicgen.errors import check_seed
    from musicgen.evaluate.plots import plot_attention

    loaded = load_checkpoint(checkpoint)
    n_layers = loaded.config.model.n_layers
    layers = layers if layers is not None else sorted({0, n_layers - 1})
    heads = heads if heads is not None else list(range(min(2, loaded.config.model.n_heads)))
    if tokens < 2:
        raise MusicgenError(f"tokens: must be >= 2, got {tokens}")
    check_seed("seed", seed)
    ids = loaded.tokenizer.encode(midi)[:tokens]
    maps = attention_maps(loaded.model, ids, layers, heads, seed=seed)
    panels = {f"layer {lay} head {h}": a for (lay, h), a in maps.items()}
    return plot_attention(
        panels,
        Path(out) / "attention.png",
        title=f"{loaded.config.model.pe}: attention on {Path(midi).name} ({len(ids)} tokens)",
    )
