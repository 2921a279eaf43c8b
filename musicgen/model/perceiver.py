"""Perceiver S ("A Multi-Scale Perceiver with Effective Segmentation for Long-Term Expressive
Symbolic Music Generation", 2024): a long context read once by cross-attention, then n latents.

Everything runs on a window of exactly m = context_len ids (left-padded at a song's head) whose
last n positions are the latents, so a window looks the same in training, evaluation and
generation. Two softmax cross-attention layers read it (`full`: causal over all m keys; `scale`:
the last n keys only; `cross: full` alone is Perceiver AR), combined, then an FFN and the
Performer blocks on the n latents. Softmax, not linear, cross-attention: its O(n m) cost is paid
once, not per layer. The interface is the Performer's (forward, score, init_state/step);
docs/perceiver.md says what each guarantees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from musicgen.config import PERCEIVER_CROSS as CROSS  # both (Perceiver S) | full (Perceiver AR)
from musicgen.errors import MusicgenError
from musicgen.model.attention import AttentionCache
from musicgen.model.base import LanguageModel
from musicgen.model.dropout import Dropout
from musicgen.model.spe_noise import SPENoise
from musicgen.model.transformer import Block

PAD_ID = 0  # docs/CONTRACTS.md: pad id is 0 for every tokenizer
COMBINES = ("sum", "sequential")
SCORE_BUDGET = 2**26  # attention-score elements per score() forward (windows are batched up to it)


def attention_mask(q_pos: Tensor, k_pos: Tensor, key_ok: Tensor) -> Tensor:
    """(Nq,), (Nk,), key_ok (B, Nk) -> allowed (B, 1, Nq, Nk): causal, no padding keys but self."""
    causal = k_pos[None, :] <= q_pos[:, None]  # (Nq, Nk)
    itself = k_pos[None, :] == q_pos[:, None]
    return (causal & (key_ok[:, None, :] | itself))[:, None]


class CrossAttention(nn.Module):
    """Multi-head softmax attention of latents over a context (own norms, optional SPE gate)."""

    def __init__(self, cfg, spe: bool) -> None:
        super().__init__()
        self.h, self.d = cfg.n_heads, cfg.d_model // cfg.n_heads
        self.norm_q, self.norm_kv = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.q = nn.Linear(cfg.d_model, cfg.d_model)
        self.kv = nn.Linear(cfg.d_model, 2 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        self.gate = nn.Parameter(torch.zeros(self.h, self.d)) if spe and cfg.gated else None

    def keys(self, ctx: Tensor, codes=None) -> tuple[Tensor, Tensor]:
        """ctx (B, Nk, d_model) -> k (B, H, Nk, D or R), v (B, H, Nk, D)."""
        b, nk, _ = ctx.shape
        k, v = self.kv(self.norm_kv(ctx)).view(b, nk, 2, self.h, self.d).unbind(2)
        if codes is not None:
            with torch.autocast(device_type=ctx.device.type, enabled=False):
                k = codes.project(k.float(), "k", self.gate)  # (B, Nk, H, R)
        return k.transpose(1, 2), v.transpose(1, 2)

    def query(self, x: Tensor, codes=None) -> Tensor:
        """x (B, Nq, d_model) -> q (B, H, Nq, D or R)."""
        b, nq, _ = x.shape
        q = self.q(self.norm_q(x)).view(b, nq, self.h, self.d)
        if codes is not None:
            with torch.autocast(device_type=x.device.type, enabled=False):
                q = codes.project(q.float(), "q", self.gate)
        return q.transpose(1, 2)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor) -> Tensor:
        """q (B,H,Nq,E), k (B,H,Nk,E), v (B,H,Nk,D), allowed (B,1,Nq,Nk) -> (B, Nq, d_model)."""
        dt = v.dtype
        out = F.scaled_dot_product_attention(
            q.to(dt), k.to(dt), v, attn_mask=allowed, scale=1.0 / math.sqrt(self.d)
        )
        b, _, nq, _ = out.shape
        return self.out(out.transpose(1, 2).reshape(b, nq, -1))


@dataclass
class PerceiverState:
    """Generation state: next song position, SPE noise, the window's caches, latent running sums."""

    pos: int
    noise: SPENoise
    history: Tensor  # (B, m - n): the last m - n ids fed (pad before the song's start)
    k_full: Tensor | None = None  # (B, H, m, E) keys of the current window (full layer)
    v_full: Tensor | None = None  # (B, H, m, D)
    ok_full: Tensor | None = None  # (B, m) key is not padding
    k_scale: Tensor | None = None  # (B, H, n, E) keys of the current query block (scale layer)
    v_scale: Tensor | None = None  # (B, H, n, D)
    layers: list[AttentionCache] = field(default_factory=list)


class PerceiverS(LanguageModel):
    """Embedding + window PE, two cross-attention layers, FFN, Performer blocks, norm, head."""

    def __init__(self, cfg) -> None:
        p = cfg.perceiver
        if not 0 < p.n_queries <= p.context_len:
            raise MusicgenError(
                f"model.perceiver: need 0 < n_queries <= context_len, got n_queries="
                f"{p.n_queries}, context_len={p.context_len}"
            )
        if p.combine not in COMBINES:
            raise MusicgenError(
                f"model.perceiver.combine: unknown '{p.combine}'; valid: {', '.join(COMBINES)}"
            )
        if p.cross not in CROSS:
            raise MusicgenError(
                f"model.perceiver.cross: unknown '{p.cross}'; valid: {', '.join(CROSS)}"
            )
        if cfg.d_model % cfg.n_heads:
            raise MusicgenError(
                f"model.n_heads: d_model {cfg.d_model} is not divisible by {cfg.n_heads} heads"
            )
        # window positions are < m; SPE: one shared module, or one per block then per cross layer
        super().__init__(cfg, p.context_len, cfg.n_layers + (2 if p.cross == "both" else 1))
        self.m, self.n, self.combine = p.context_len, p.n_queries, p.combine
        self.predicts_last = self.n
        self.drop = Dropout(cfg.dropout)
        self.cross_full = CrossAttention(cfg, self.uses_spe)
        # Perceiver AR (cross: full) has no scale-masked layer at all (no unused parameters)
        self.cross_scale = CrossAttention(cfg, self.uses_spe) if p.cross == "both" else None
        self.norm_ff = nn.LayerNorm(cfg.d_model)
        self.ffn = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff),
            nn.GELU(),
            Dropout(cfg.dropout),
            nn.Linear(cfg.d_ff, cfg.d_model),
        )
        self.blocks = nn.ModuleList(Block(cfg, self.uses_spe) for _ in range(cfg.n_layers))
        self._build_head()

    # ------------------------------------------------------------------ pieces

    def embed_window(self, ids: Tensor, pos: Tensor) -> Tensor:
        """ids (B, N) at window positions pos (N,) -> (B, N, d_model)."""
        return self.drop(self.embed_tokens(ids, pos))

    def codes(
        self,
        role: int,
        q: tuple[int, int],
        k: tuple[int, int],
        noise: SPENoise | None,
        device: torch.device,
        memo: dict | None = None,
    ):
        """SPE codes of window positions q = [lo, hi), k = [lo, hi) for role 0 (full cross),
        1 (scale cross), 2 + l (block l); None without SPE. `memo` shares equal codes in a pass."""
        if not self.uses_spe:
            return None
        # not shared: spe[l] serves block l (as in the Performer), then full and scale cross
        n_blocks = len(self.blocks)
        idx = 0 if len(self.spe) == 1 else (role - 2 if role >= 2 else n_blocks + role)
        key = (idx, q, k)
        if memo is not None and key in memo:
            return memo[key]
        with torch.autocast(device_type=device.type, enabled=False):
            out = self.spe[idx].codes(
                torch.arange(*q, device=device), torch.arange(*k, device=device), noise
            )
        if memo is not None:
            memo[key] = out
        return out

    def full_attention(
        self, q_in: Tensor, ctx: Tensor, ok: Tensor, noise, memo: dict | None = None
    ) -> Tensor:
        """Causal mask M only: query at window position i sees ctx 0..i. (B, n, d), (B, m, d)."""
        m, n = ctx.shape[1], q_in.shape[1]
        pos = torch.arange(m, device=ctx.device)
        codes = self.codes(0, (m - n, m), (0, m), noise, ctx.device, memo)
        k, v = self.cross_full.keys(ctx, codes)
        return self.cross_full.attend(
            self.cross_full.query(q_in, codes), k, v, attention_mask(pos[m - n :], pos, ok)
        )

    def scale_attention(
        self, q_in: Tensor, ctx: Tensor, ok: Tensor, noise, memo: dict | None = None
    ) -> Tensor:
        """M + scale mask M^: window positions 0..m-n-1 hidden (their keys are never computed)."""
        m, n = ctx.shape[1], q_in.shape[1]
        q_pos = torch.arange(m - n, m, device=ctx.device)
        codes = self.codes(1, (m - n, m), (m - n, m), noise, ctx.device, memo)
        k, v = self.cross_scale.keys(ctx[:, m - n :], codes)
        return self.cross_scale.attend(
            self.cross_scale.query(q_in, codes), k, v, attention_mask(q_pos, q_pos, ok[:, m - n :])
        )

    def cross(
        self, lat: Tensor, ctx: Tensor, ok: Tensor, noise: SPENoise | None, memo: dict | None = None
    ) -> Tensor:
        """lat (B, n, d) = ctx[:, m-n:], ctx (B, m, d), ok (B, m) -> latents (B, n, d)."""
        a = self.full_attention(lat, ctx, ok, noise, memo)
        if self.cross_scale is None:  # Perceiver AR: the causal cross-attention only
            h = lat + self.drop(a)
        elif self.combine == "sum":
            h = lat + self.drop(a) + self.drop(self.scale_attention(lat, ctx, ok, noise, memo))
        else:
            h = lat + self.drop(a)
            h = h + self.drop(self.scale_attention(h, ctx, ok, noise, memo))
        return h + self.drop(self.ffn(self.norm_ff(h)))

    def core(self, x: Tensor, ok: Tensor, noise: SPENoise | None) -> Tensor:
        """Embedded window x (B, m, d), ok (B, m) -> logits (B, n, V) of its last n positions."""
        m, n, memo = x.shape[1], self.n, {}
        h = self.cross(x[:, m - n :], x, ok, noise, memo)
        for i, block in enumerate(self.blocks):
            h = block(h, self.codes(2 + i, (m - n, m), (m - n, m), noise, x.device, memo))
        return self.logits(h)

    def window_logits(self, win: Tensor, noise: SPENoise | None) -> Tensor:
        """A full window of ids (B, m) -> logits (B, n, V)."""
        pos = torch.arange(self.m, device=win.device)
        return self.core(self.embed_window(win, pos), win != PAD_ID, noise)

    # ------------------------------------------------------------------ interface

    def forward(self, ids: Tensor, noise: SPENoise | None = None) -> Tensor:
        """ids (B, N <= m) -> logits (B, min(N, n), V) for the last positions (`noise`: as the
        Performer's, None draws one).

        N >= n: ids are the end of a window (left-padded to m). N < n: ids are a song's head, set
        as the first query block of score() (no padding latents), so forward == score there.
        """
        b, length = ids.shape
        if length > self.m:
            raise MusicgenError(
                f"perceiver: forward takes at most context_len={self.m} ids, got {length}; "
                "use score() for longer sequences"
            )
        noise = noise if noise is not None else self.new_noise(ids.device)
        left = self.m - max(length, self.n)
        right = max(0, self.n - length)
        win = F.pad(ids, (left, right), value=PAD_ID)  # (B, m)
        return self.window_logits(win, noise)[:, : min(length, self.n)]

    def score(self, ids: Tensor, seed: int | None = None) -> Tensor:
        """ids (B, L) -> logits (B, L, V): position t predicted in the window of its query block."""
        b, length = ids.shape
        m, n = self.m, self.n
        noise = self.new_noise(ids.device, seed)
        wins = []
        for start in range(0, length, n):  # query block start..start+n, window ends at start + n
            lo, hi = start + n - m, start + n
            part = ids[:, max(0, lo) : min(hi, length)]
            wins.append(F.pad(part, (max(0, -lo), max(0, hi - length)), value=PAD_ID))
        heads = self.cfg.n_heads
        group = max(1, SCORE_BUDGET // (b * heads * n * m))
        out = []
        for g in range(0, len(wins), group):
            chunk = torch.cat(wins[g : g + group])  # (G * B, m)
            logits = self.window_logits(chunk, noise)  # (G * B, n, V)
            out.extend(logits.split(b))
        return torch.cat(out, 1)[:, :length]

    def init_state(
        self,
        batch_size: int,
        device: torch.device | str,
        seed: int | None = None,
        generator: torch.Generator | None = None,
    ) -> PerceiverState:
        """Empty window (all padding) and the SPE noise (seed, else `generator`, else global)."""
        history = torch.full((batch_size, self.m - self.n), PAD_ID, dtype=torch.long, device=device)
        noise = self.new_noise(device, seed, generator)
        return PerceiverState(pos=0, noise=noise, history=history)

    def _open_block(self, state: PerceiverState, ids: Tensor) -> None:
        """New query block: keys/values of the m - n context ids; reset the latent sums."""
        m, n = self.m, self.n
        b, dev = ids.shape[0], ids.device
        ctx_ids = state.history  # (B, m - n) at window positions 0..m-n-1
        pos = torch.arange(m - n, device=dev)
        e = self.cfg.num_realizations if self.uses_spe else self.cross_full.d
        dt = self.embed.weight.dtype
        state.k_full = torch.zeros(b, self.cfg.n_heads, m, e, device=dev, dtype=dt)
        state.v_full = torch.zeros(b, self.cfg.n_heads, m, self.cross_full.d, device=dev, dtype=dt)
        if m > n:
            cf = self.codes(0, (0, m - n), (0, m - n), state.noise, dev)
            kf, vf = self.cross_full.keys(self.embed_window(ctx_ids, pos), cf)
            state.k_full[:, :, : m - n], state.v_full[:, :, : m - n] = kf, vf
        state.ok_full = torch.zeros(b, m, dtype=torch.bool, device=dev)
        state.ok_full[:, : m - n] = ctx_ids != PAD_ID
        if self.cross_scale is not None:
            state.k_scale = state.k_full.new_zeros(b, self.cfg.n_heads, n, e)
            state.v_scale = state.v_full.new_zeros(b, self.cfg.n_heads, n, self.cross_full.d)
        state.layers = [blk.attn.init_cache(b, dev) for blk in self.blocks]

    def step(self, ids: Tensor, state: PerceiverState) -> tuple[Tensor, PerceiverState]:
        """ids (B,) at song position state.pos -> logits (B, V) equal to score()'s at that position.

        Per token: one query against <= m cached keys (full layer) and <= n (scale layer), one step
        of each latent block; once per n tokens the m - n context keys are recomputed.
        """
        m, n = self.m, self.n
        j = state.pos % n  # slot in the query block
        if j == 0:
            self._open_block(state, ids)
        w = m - n + j  # window position
        wpos = torch.tensor([w], device=ids.device)
        x = self.embed_window(ids[:, None], wpos)  # (B, 1, d)
        ok = ids != PAD_ID
        memo, one = {}, (w, w + 1)
        cf = self.codes(0, one, one, state.noise, ids.device, memo)
        kf, vf = self.cross_full.keys(x, cf)
        state.k_full[:, :, w : w + 1], state.v_full[:, :, w : w + 1] = kf, vf
        state.ok_full[:, w] = ok
        keys_f = torch.arange(w + 1, device=ids.device)
        a = self.cross_full.attend(
            self.cross_full.query(x, cf),
            state.k_full[:, :, : w + 1],
            state.v_full[:, :, : w + 1],
            attention_mask(wpos, keys_f, state.ok_full[:, : w + 1]),
        )
        h = x + a if self.cross_scale is None else self._step_scale(x, a, state, j, w, memo)
        h = h + self.ffn(self.norm_ff(h))
        for i, (block, cache) in enumerate(zip(self.blocks, state.layers, strict=True)):
            h = block(h, self.codes(2 + i, one, one, state.noise, ids.device, memo), cache)
        if m > n:
            state.history = torch.cat([state.history[:, 1:], ids[:, None]], 1)
        state.pos += 1
        return self.logits(h)[:, 0], state

    def _step_scale(
        self, x: Tensor, a: Tensor, state: PerceiverState, j: int, w: int, memo: dict
    ) -> Tensor:
        """The scale layer's part of `step` (x, a: (B, 1, d)) -> h (B, 1, d) before the FFN."""
        m, n, dev = self.m, self.n, x.device
        cs = self.codes(1, (w, w + 1), (w, w + 1), state.noise, dev, memo)
        ks, vs = self.cross_scale.keys(x, cs)
        state.k_scale[:, :, j : j + 1], state.v_scale[:, :, j : j + 1] = ks, vs
        wpos = torch.tensor([w], device=dev)
        keys = torch.arange(m - n, w + 1, device=dev)
        mask_s = attention_mask(wpos, keys, state.ok_full[:, m - n : w + 1])
        ks, vs = state.k_scale[:, :, : j + 1], state.v_scale[:, :, : j + 1]
        if self.combine == "sum":
            return x + a + self.cross_scale.attend(self.cross_scale.query(x, cs), ks, vs, mask_s)
        h = x + a
        return h + self.cross_scale.attend(self.cross_scale.query(h, cs), ks, vs, mask_s)


def build_perceiver(cfg) -> PerceiverS:
    return PerceiverS(cfg)
