"""The Performer language model: embedding, N blocks (linear attention + FFN), norm, output head.

One interface for every positional encoding:
  forward(ids[B, N], state=None) -> logits[B, N, V]   (state: use exactly that state's SPE noise)
  init_state(batch_size, device, seed=None) -> PerformerState   (fixes the noise for the sequence)
  step(ids[B], state) -> (logits[B, V], state)         (any position, far past the training length)
  on_train_step(step, generator=None)                  (FAVOR+ redraw policy; not in eval)
With model.musical on, `musical.py` adds the bar/position embeddings and musical-time SPE codes,
from onsets it derives from the ids (parallel) or carries in `state.time` (step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from musicgen.errors import MusicgenError
from musicgen.model.attention import AttentionCache, CausalSelfAttention
from musicgen.model.musical import MusicalState, build_musical
from musicgen.model.positional import SPE_KINDS, SPENoise, build_position_modules


@dataclass
class PerformerState:
    """Everything generation carries: next position, the SPE noise, each layer's (S, z, shift),
    and the musical time (with model.musical on)."""

    pos: int
    noise: SPENoise
    layers: list[AttentionCache] = field(default_factory=list)
    time: MusicalState | None = None


class Block(nn.Module):
    def __init__(self, cfg, spe: bool) -> None:
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg, spe)
        self.ffn = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Dropout(cfg.dropout),
            nn.Linear(cfg.d_ff, cfg.d_model),
        )
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, codes=None, cache: AttentionCache | None = None) -> Tensor:
        if self.pre:
            x = x + self.drop(self.attn(self.norm1(x), codes, cache))
            return x + self.drop(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.drop(self.attn(x, codes, cache)))
        return self.norm2(x + self.drop(self.ffn(x)))


class Performer(nn.Module):
    """Token embedding (x sqrt(d_model)), absolute PE or SPE, blocks, final norm (pre-norm only)."""

    def __init__(self, cfg, time_tables=None) -> None:
        super().__init__()
        if cfg.vocab_size <= 0:
            raise MusicgenError("model.vocab_size: must be set (> 0) before building the model")
        if cfg.norm not in ("pre", "post"):
            raise MusicgenError(f"model.norm: unknown '{cfg.norm}'; valid: pre, post")
        self.cfg = cfg
        self.d_model = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        nn.init.normal_(self.embed.weight, std=cfg.d_model**-0.5)
        # shared SPE: one module (gates stay per layer); else one per layer
        self.ape, self.spe = build_position_modules(cfg, cfg.max_len, cfg.n_layers)
        self.uses_spe = cfg.pe in SPE_KINDS
        # musical position (model.musical): time from the ids, embeddings, musical-time SPE
        self.musical = build_musical(cfg, time_tables, cfg.n_layers)
        spe_in = self.uses_spe or (self.musical is not None and len(self.musical.spe) > 0)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg, spe_in) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if getattr(cfg, "tie_embeddings", False):
            self.head.weight = self.embed.weight

    # ------------------------------------------------------------------ helpers

    def _inputs(self, ids: Tensor, pos: Tensor, onset: Tensor | None = None) -> Tensor:
        x = self.embed(ids) * math.sqrt(self.d_model)
        if self.ape is not None:
            x = x + self.ape(pos).to(x.dtype)
        if self.musical is not None and self.musical.embed is not None:
            x = x + self.musical.embedding(onset).to(x.dtype)  # onset (B, N) sub-beats
        return self.drop(x)

    def _codes(self, pos: Tensor, noise: SPENoise | None, onset: Tensor | None = None) -> list:
        """SPE codes per layer (the same object for all layers when shared), or Nones."""
        codes = [None] * len(self.blocks)
        if self.uses_spe:
            with torch.autocast(device_type=pos.device.type, enabled=False):
                codes = [spe.codes(pos, pos, noise) for spe in self.spe]
            codes = codes * len(self.blocks) if len(codes) == 1 else codes
        if self.musical is not None:
            codes = self.musical.add_codes(codes, onset, noise)
        return codes

    def _onsets(self, ids: Tensor) -> Tensor | None:
        """ids (B, N) -> onset in sub-beats (B, N), or None without model.musical."""
        return self.musical.time.onsets(ids) if self.musical is not None else None

    def new_noise(self, device: torch.device | str, seed: int | None = None) -> SPENoise:
        """Fresh SPE noise; its seed comes from torch's global RNG unless given."""
        if seed is None:
            seed = int(torch.randint(0, 2**62, ()).item())
        return SPENoise(seed, device)

    # ------------------------------------------------------------------ interface

    def forward(self, ids: Tensor, state: PerformerState | None = None) -> Tensor:
        """ids (B, N) -> logits (B, N, V); noise drawn once per call (shared by the batch)."""
        n = ids.shape[1]
        pos = torch.arange(n, device=ids.device)
        noise = state.noise if state is not None else self.new_noise(ids.device)
        onset = self._onsets(ids)
        x = self._inputs(ids, pos, onset)  # (B, N, d_model)
        for block, codes in zip(self.blocks, self._codes(pos, noise, onset), strict=True):
            x = block(x, codes)
        return self.head(self.norm(x))

    def init_state(
        self, batch_size: int, device: torch.device | str, seed: int | None = None
    ) -> PerformerState:
        layers = [b.attn.init_cache(batch_size, device) for b in self.blocks]
        time = self.musical.time.init_state(batch_size, device) if self.musical else None
        return PerformerState(pos=0, noise=self.new_noise(device, seed), layers=layers, time=time)

    def step(self, ids: Tensor, state: PerformerState) -> tuple[Tensor, PerformerState]:
        """ids (B,) at position state.pos -> logits (B, V); advances `state` (in place)."""
        pos = torch.tensor([state.pos], device=ids.device)
        onset = self.musical.time.step(ids, state.time)[:, None] if self.musical else None
        x = self._inputs(ids[:, None], pos, onset)  # (B, 1, d_model)
        for block, codes, cache in zip(
            self.blocks, self._codes(pos, state.noise, onset), state.layers, strict=True
        ):
            x = block(x, codes, cache)
        state.pos += 1
        return self.head(self.norm(x))[:, 0], state

    def on_train_step(self, step: int, generator: torch.Generator | None = None) -> None:
        """FAVOR+ redraw (cfg.redraw): never | every redraw_every steps | with redraw_prob.

        `generator` (CPU) makes the decision and the new features a function of it alone (seeded
        from (seed, step), data-parallel ranks and resumed runs agree); default: torch's global
        RNG. Nothing happens in eval mode: features stay frozen for evaluation and generation.
        """
        if not self.training or self.cfg.feature_map != "favor":
            return
        policy = self.cfg.redraw
        if policy == "never":
            return
        if policy == "every":
            do = step > 0 and step % max(1, self.cfg.redraw_every) == 0
        else:
            do = bool(torch.rand((), generator=generator) < self.cfg.redraw_prob)
        if do:
            for block in self.blocks:
                block.attn.features.redraw(generator)
