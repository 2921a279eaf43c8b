"""What the two language models (Performer, PerceiverS) share: token embedding and its init, the
position modules, the final norm + output head (optionally tied to the embedding), SPE noise and
the FAVOR+ redraw policy. Subclasses build their body between `__init__` and `_build_head`, so
parameter names (and the order random init draws in) are the ones the checkpoints were saved with.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from musicgen.errors import MusicgenError
from musicgen.model.encodings import SPE_KINDS, build_position_modules
from musicgen.model.spe_noise import SPENoise


class LanguageModel(nn.Module):
    """Base of the models `build_model` returns; subclasses own `blocks` (Performer blocks)."""

    blocks: nn.ModuleList

    def __init__(self, cfg, max_len: int, n_spe: int) -> None:
        """`max_len`: rows of a learned absolute table; `n_spe`: SPE modules when not shared."""
        super().__init__()
        if cfg.vocab_size <= 0:
            raise MusicgenError("model.vocab_size: must be set (> 0) before building the model")
        self.cfg = cfg
        self.d_model = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        nn.init.normal_(self.embed.weight, std=cfg.d_model**-0.5)
        self.ape, self.spe = build_position_modules(cfg, max_len, n_spe)
        self.uses_spe = cfg.pe in SPE_KINDS

    def _build_head(self) -> None:
        """Final norm (pre-norm only) and the output head; called last by the subclass."""
        self.norm = nn.LayerNorm(self.d_model) if self.cfg.norm == "pre" else nn.Identity()
        self.head = nn.Linear(self.d_model, self.cfg.vocab_size, bias=False)
        if getattr(self.cfg, "tie_embeddings", False):
            self.head.weight = self.embed.weight

    def embed_tokens(self, ids: Tensor, pos: Tensor) -> Tensor:
        """ids (B, N) at positions pos (N,) -> (B, N, d_model), before dropout."""
        x = self.embed(ids) * math.sqrt(self.d_model)
        if self.ape is not None:
            x = x + self.ape(pos).to(x.dtype)
        return x

    def logits(self, h: Tensor) -> Tensor:
        """Hidden states (B, N, d_model) -> logits (B, N, V)."""
        return self.head(self.norm(h))

    def new_noise(
        self,
        device: torch.device | str,
        seed: int | None = None,
        generator: torch.Generator | None = None,
    ) -> SPENoise:
        """Fresh SPE noise. No seed: one is drawn from `generator` (on any device), else from
        torch's global RNG, so a caller that owns a generator needs no hidden global state."""
        if seed is None:
            where = generator.device if generator is not None else None
            seed = int(torch.randint(0, 2**62, (), generator=generator, device=where).item())
        return SPENoise(seed, device)

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
            for block in self.blocks:  # windowed softmax blocks (local.py) have no features
                features = getattr(block.attn, "features", None)
                if features is not None:
                    features.redraw(generator)
