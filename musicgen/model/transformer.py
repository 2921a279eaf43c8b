"""The Performer language model: embedding, N blocks (linear attention + FFN), norm, output head.

One interface for every positional encoding:
  forward(ids[B, N], noise=None) -> logits[B, N, V]   (noise: that SPE noise, e.g. state.noise)
  init_state(batch_size, device, seed=None, generator=None) -> PerformerState   (fixes the noise)
  step(ids[B], state) -> (logits[B, V], state)         (any position, far past the training length)
  on_train_step(step, generator=None)                  (FAVOR+ redraw policy; not in eval)
Embedding, head, tying, noise and the redraw policy live in `base.LanguageModel`.
With model.musical on, `musical.py` adds the bar/position embeddings and musical-time SPE codes,
from onsets it derives from the ids (parallel) or carries in `state.time` (step). Blocks listed
in model.local_layers use windowed softmax attention (`local.py`) instead of linear attention.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from musicgen.errors import MusicgenError
from musicgen.model.attention import AttentionCache, CausalSelfAttention, matmul_dtype
from musicgen.model.base import LanguageModel
from musicgen.model.dropout import Dropout
from musicgen.model.fused import StepPlan, quantize_int8
from musicgen.model.local import LocalAttention, WindowCache, rotations
from musicgen.model.musical import MusicalState, build_musical
from musicgen.model.positional import RowCodes
from musicgen.model.spe_noise import SPENoise


@dataclass
class PerformerState:
    """Everything generation carries: next position, the SPE noise, each layer's (S, z, shift),
    and the musical time (with model.musical on)."""

    pos: int
    noise: SPENoise
    layers: list[AttentionCache] = field(default_factory=list)
    time: MusicalState | None = None
    code_block: tuple[int, list] | None = None  # (first position, per-SPE-module tables)
    rot_block: tuple[int, Tensor] | None = None  # (first token, rotary matrices (N, D, D))
    plan: StepPlan | None = None  # the fused step's view of the weights (made at its first step)


STEP_BLOCK = 64  # generation: SPE codes and rotary matrices are made this many positions at once


class Block(nn.Module):
    def __init__(self, cfg, spe: bool, local: bool = False) -> None:
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        # linear attention (with SPE when the model has it), or windowed softmax (local.py)
        self.attn = LocalAttention(cfg) if local else CausalSelfAttention(cfg, spe)
        self.ffn = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff),
            nn.GELU(),
            Dropout(cfg.dropout),
            nn.Linear(cfg.d_ff, cfg.d_model),
        )
        self.drop = Dropout(cfg.dropout)

    def forward(self, x: Tensor, codes=None, cache: AttentionCache | None = None) -> Tensor:
        if self.pre:
            x = x + self.drop(self.attn(self.norm1(x), codes, cache))
            return x + self.drop(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.drop(self.attn(x, codes, cache)))
        return self.norm2(x + self.drop(self.ffn(x)))


class Performer(LanguageModel):
    """Token embedding (x sqrt(d_model)), absolute PE or SPE, blocks, final norm (pre-norm only)."""

    def __init__(self, cfg, time_tables=None) -> None:
        if cfg.norm not in ("pre", "post"):
            raise MusicgenError(f"model.norm: unknown '{cfg.norm}'; valid: pre, post")
        # shared SPE: one module (gates stay per layer); else one per layer
        super().__init__(cfg, cfg.max_len, cfg.n_layers)
        # musical position (model.musical): time from the ids, embeddings, musical-time SPE
        self.musical = build_musical(cfg, time_tables, cfg.n_layers)
        spe_in = self.uses_spe or (self.musical is not None and len(self.musical.spe) > 0)
        self.drop = Dropout(cfg.dropout)
        local = set(cfg.local_layers)
        self.blocks = nn.ModuleList(Block(cfg, spe_in, i in local) for i in range(cfg.n_layers))
        self._build_head()
        self.int8_weights: dict | None = None  # `use_int8`: the generation step's int8 copies

    def use_int8(self, on: bool = True) -> None:
        """Weight-only int8 for the generation step (CPU): the blocks' Linear weights are
        quantized once, now (per output row), and every later `step` without autograd reads
        them instead of the float weights (training, `forward` and the head keep the floats);
        the windowed softmax layers' keys and values are then kept in bf16.
        Call again after the weights change; `use_int8(False)` goes back to the floats."""
        if on and next(self.parameters()).device.type != "cpu":
            raise MusicgenError("int8: weight-only int8 decoding runs on the CPU only")
        lins = [m for b in self.blocks for m in b.modules() if isinstance(m, nn.Linear)]
        self.int8_weights = {m: quantize_int8(m.weight) for m in lins} if on else None

    # ------------------------------------------------------------------ helpers

    def _inputs(
        self, ids: Tensor, pos: Tensor, onset: Tensor | None = None, notes: Tensor | None = None
    ) -> Tensor:
        x = self.embed_tokens(ids, pos)
        if self.musical is not None and self.musical.embed is not None:
            x = x + self.musical.embedding(onset, notes).to(x.dtype)  # onset (B, N) sub-beats
        return self.drop(x)

    def _codes(
        self,
        pos: Tensor,
        noise: SPENoise | None,
        onset: Tensor | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> list:
        """SPE codes per layer (the same object for all layers when shared), or Nones; their
        tables in `dtype` (the attention's `matmul_dtype` for a forward, float32 for a step)."""
        codes = [None] * len(self.blocks)
        if self.uses_spe:
            with torch.autocast(device_type=pos.device.type, enabled=False):
                codes = [spe.codes(pos, pos, noise, dtype) for spe in self.spe]
            codes = codes * len(self.blocks) if len(codes) == 1 else codes
        if self.musical is not None:
            codes = self.musical.add_codes(codes, onset, noise)
        return codes

    def _step_codes(self, state: PerformerState) -> list:
        """The SPE codes of the step's position, one per layer, sliced from tables made for
        STEP_BLOCK positions at once (a block's build is then a small share of each step); the
        same codes as `_codes` up to float rounding."""
        if not self.uses_spe:
            return [None] * len(self.blocks)
        start = state.pos - state.pos % STEP_BLOCK
        if state.code_block is None or state.code_block[0] != start:
            pos = torch.arange(start, start + STEP_BLOCK, device=state.noise.device)
            with torch.autocast(device_type=pos.device.type, enabled=False):
                made = [spe.codes(pos, pos, state.noise) for spe in self.spe]
            tables = [(torch.stack([c.table("q"), c.table("k")]), c.eps, c.r) for c in made]
            state.code_block = (start, tables)  # (2, STEP_BLOCK, H, D, R) per SPE module
        i = state.pos - start
        codes = [RowCodes(qk[:, i : i + 1], eps, r) for qk, eps, r in state.code_block[1]]
        return codes * len(self.blocks) if len(codes) == 1 else codes

    def _rotation(self, state: PerformerState) -> Tensor | None:
        """The rotary matrix (D, D) of this step for the windowed softmax blocks (at their
        token index), sliced from STEP_BLOCK matrices made at once; None without such blocks
        or without rotary."""
        for block, cache in zip(self.blocks, state.layers, strict=True):
            if isinstance(cache, WindowCache) and block.attn.rope:
                start = cache.pos - cache.pos % STEP_BLOCK
                if state.rot_block is None or state.rot_block[0] != start:
                    made = rotations(start, STEP_BLOCK, block.attn.head_dim, cache.k.device)
                    state.rot_block = (start, made)
                return state.rot_block[1][cache.pos - start]
        return None

    def _onsets(self, ids: Tensor) -> Tensor | None:
        """ids (B, N) -> onset in sub-beats (B, N), or None without model.musical."""
        return self.musical.time.onsets(ids) if self.musical is not None else None

    # ------------------------------------------------------------------ interface

    def forward(self, ids: Tensor, noise: SPENoise | None = None) -> Tensor:
        """ids (B, N) -> logits (B, N, V). `noise`: the SPE noise to use (e.g. `state.noise` of
        an `init_state` with the same seed, to compare with `step`); None: drawn once per call
        from torch's global RNG, shared by the batch."""
        n = ids.shape[1]
        pos = torch.arange(n, device=ids.device)
        noise = noise if noise is not None else self.new_noise(ids.device)
        onset = self._onsets(ids)
        notes = None
        if self.musical is not None and self.musical.counts_notes:
            notes = self.musical.time.notes_at_onset(ids, onset)  # (B, N)
        x = self._inputs(ids, pos, onset, notes)  # (B, N, d_model)
        dtype = matmul_dtype(ids.device.type)  # the SPE tables' (bf16 under bf16 autocast)
        for block, codes in zip(self.blocks, self._codes(pos, noise, onset, dtype), strict=True):
            x = block(x, codes)
        return self.logits(x)

    def init_state(
        self,
        batch_size: int,
        device: torch.device | str,
        seed: int | None = None,
        generator: torch.Generator | None = None,
    ) -> PerformerState:
        """Empty caches and the sequence's SPE noise (from `seed`, else drawn from `generator`,
        else from torch's global RNG)."""
        layers = [b.attn.init_cache(batch_size, device) for b in self.blocks]
        time = self.musical.time.init_state(batch_size, device) if self.musical else None
        noise = self.new_noise(device, seed, generator)
        return PerformerState(pos=0, noise=noise, layers=layers, time=time)

    def step(self, ids: Tensor, state: PerformerState) -> tuple[Tensor, PerformerState]:
        """ids (B,) at position state.pos -> logits (B, V); advances `state` (in place)."""
        onset = self.musical.time.step(ids, state.time)[:, None] if self.musical else None
        notes = state.time.notes[:, None] if self.musical and self.musical.counts_notes else None
        if self.training or torch.is_grad_enabled():  # the modules' own forward
            pos = torch.tensor([state.pos], device=ids.device)
            x = self._inputs(ids[:, None], pos, onset, notes)  # (B, 1, d_model)
            codes = self._codes(pos, state.noise, onset)
            for block, c, cache in zip(self.blocks, codes, state.layers, strict=True):
                x = block(x, c, cache)
            x = x[:, 0]
        else:  # generation: the fused one-token step of each block (fused.py)
            x = self._fused(ids, onset, notes, state)
        state.pos += 1
        return self.logits(x), state

    def _fused(self, ids, onset, notes, state: PerformerState) -> Tensor:
        """`step` in eval mode without autograd, through the state's `StepPlan` -> (B, d_model)."""
        if state.plan is None:
            state.plan = StepPlan(self)
        x = state.plan.inputs(ids, onset, notes)  # (B, d_model)
        if self.ape is not None:
            x = x + self.ape(torch.tensor([state.pos], device=ids.device)).to(x.dtype)
        codes = self._step_codes(state)
        if self.musical is not None:
            codes = self.musical.add_codes(codes, onset, state.noise)
        rot = self._rotation(state)
        for block, c, cache in zip(state.plan.blocks, codes, state.layers, strict=True):
            x = block(x, c, cache, rot)
        return x
