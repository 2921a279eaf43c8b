"""Musical position as model input: where in the bar every token sits, derived from the ids alone.

The tokenizer's `TimeTables` (per-id lookups, rebuilt from the checkpoint's tokenizer dict) give
each token's onset in sub-beats (`onset = bar_index * positions_per_bar + position`):
  parallel (ids[B, N]): onset = max(cummax(key), 0) + cumsum(shift)   (key: the position a token
                        sets, offset by the bars counted so far; -1 for tokens that set none)
  step (ids[B]):        the same running max / sum carried in a `MusicalState`, O(1) per token.
Both are integer arithmetic, so they agree exactly. Two uses (model.musical, docs/model.md):
  embed: true      add learned embeddings of (position in bar, beat, bar index mod phrase_bars);
                   with notes_at_onset also of how many notes the current onset holds so far
                   (a count that restarts where the onset changes: the model sees a chord grow)
  spe: sine_spe    sineSPE codes indexed by the onset (musical time), not the token index: the
                   attention kernel depends on the onset difference only (structure-informed PE
                   in the sense of Agarwal et al.'s StrIPE). With a token-index SPE (`pe`) as well,
                   the two codes are summed, which sums their kernels (see `SumCodes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from musicgen.errors import MusicgenError
from musicgen.model.positional import SineSPE
from musicgen.model.spe_noise import SPENoise

MUSICAL_SPE = ("none", "sine_spe")  # registry names of model.musical.spe
MUSICAL_TAG = 1000  # noise tags of musical-time SPE modules (token-index SPE uses 0..n_layers-1)
MAX_NOTES = 15  # notes_at_onset: counts from here on share one embedding
BLOCK_SPAN = 1 << 40  # recall blocks' keys are offset by this per block (one running max)


@dataclass
class MusicalState:
    """What generation carries to know the time: bars read, running max key, summed shifts."""

    bars: Tensor  # (B,) int64
    key: Tensor  # (B,) int64
    shift: Tensor  # (B,) int64
    onset: Tensor  # (B,) int64: the onset after the last id (-1 before any)
    notes: Tensor  # (B,) int64: notes read at that onset
    depth: Tensor  # (B,) int64: open recall blocks (tokenizers.recall)
    block_bars: Tensor  # (B,) int64: bars opened inside the current recall block
    block_key: Tensor  # (B,) int64: its running max key (-1 before its first position)


class MusicalTime(nn.Module):
    """ids -> onset in sub-beats, in the parallel and the step form (tables as buffers)."""

    def __init__(self, tables) -> None:
        super().__init__()
        self.per_bar, self.per_beat = int(tables.positions_per_bar), int(tables.positions_per_beat)
        for name in ("bar", "position", "shift"):  # derived from the tokenizer: not saved
            buf = torch.as_tensor(getattr(tables, name), dtype=torch.long)
            self.register_buffer(name, buf, persistent=False)
        zeros = torch.zeros(len(tables.bar))
        for name in ("note", "recall"):  # absent from a tokenizer: all zero
            buf = getattr(tables, name, None)
            buf = torch.as_tensor(zeros if buf is None else buf, dtype=torch.long)
            self.register_buffer(name, buf, persistent=False)

    def _key(self, bars: Tensor, ids: Tensor, out: Tensor | None = None) -> Tensor:
        pos = self.position[ids]
        keep = pos >= 0 if out is None else (pos >= 0) & ~out
        return torch.where(keep, (bars - 1) * self.per_bar + pos, -1)

    def inside(self, ids: Tensor) -> Tensor:
        """ids (B, N) -> bool (B, N): True from a Recall_Start through its Recall_End (a
        recalled phrase, tokenizers.recall)."""
        marks = self.recall[ids]
        closes = (marks < 0).long()
        return ((marks > 0).long().cumsum(-1) - closes.cumsum(-1) + closes) > 0

    def onsets(self, ids: Tensor) -> Tensor:
        """ids (B, N) -> onset (B, N) int64 after reading each token. A recalled phrase leaves
        the song's time as it was and runs on its own time from the bar where it is recalled
        (its ids sit where their counterparts in the returning phrase will: `_recalled`)."""
        inside = self.inside(ids)
        key = self._key((self.bar[ids] * ~inside).cumsum(-1), ids, inside)
        song = key.cummax(-1).values.clamp_min(0) + (self.shift[ids] * ~inside).cumsum(-1)
        return self._recalled(ids, inside, song) if bool(inside.any()) else song

    def _recalled(self, ids: Tensor, inside: Tensor, song: Tensor) -> Tensor:
        """Onsets inside recall blocks: the bar the song is in, plus the block's own running
        time (bars it opens, positions it sets), which restarts at every Recall_Start."""
        opens = self.recall[ids] > 0
        bars = (self.bar[ids] * inside).cumsum(-1)
        bars = bars - torch.where(opens, bars, 0).cummax(-1).values  # bars into the block
        block = opens.long().cumsum(-1) * BLOCK_SPAN  # a block's keys exceed every earlier's
        pos = self.position[ids]
        key = torch.where(inside & (pos >= 0), bars * self.per_bar + pos + block, -1)
        own = (key.cummax(-1).values - block).clamp_min(0)
        return torch.where(inside, song - song % self.per_bar + own, song)

    def notes_at_onset(self, ids: Tensor, onset: Tensor) -> Tensor:
        """ids, onset (B, N) -> notes read at each token's onset up to and including it (B, N):
        a running count of note tokens that restarts where the onset changes."""
        note = self.note[ids]
        count = note.cumsum(-1)
        start = torch.ones_like(onset, dtype=torch.bool)
        start[:, 1:] = onset[:, 1:] != onset[:, :-1]
        idx = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
        first = torch.where(start, idx, 0).cummax(-1).values  # where each token's run starts
        return count - (count - note).gather(-1, first)

    def init_state(self, batch_size: int, device: torch.device | str) -> MusicalState:
        def full(v: int) -> Tensor:
            return torch.full((batch_size,), v, dtype=torch.long, device=device)

        return MusicalState(
            bars=full(0), key=full(-1), shift=full(0), onset=full(-1), notes=full(0),
            depth=full(0), block_bars=full(0), block_key=full(-1),
        )  # fmt: skip

    def step(self, ids: Tensor, state: MusicalState) -> Tensor:
        """ids (B,) -> onset (B,) after reading them; advances `state` (and its note count)."""
        marks = self.recall[ids]
        opens = marks > 0
        state.depth = state.depth + opens.long()
        inside = state.depth > 0  # inside a recalled phrase, its marks included
        state.depth = state.depth - (marks < 0).long()
        state.bars = state.bars + self.bar[ids] * ~inside
        state.key = torch.maximum(state.key, self._key(state.bars, ids, inside))
        state.shift = state.shift + self.shift[ids] * ~inside
        onset = state.key.clamp_min(0) + state.shift
        if bool(inside.any()):  # the block's own time (`_recalled`)
            state.block_bars = torch.where(opens, 0, state.block_bars) + self.bar[ids] * inside
            pos = self.position[ids]
            key = torch.where(inside & (pos >= 0), state.block_bars * self.per_bar + pos, -1)
            state.block_key = torch.maximum(torch.where(opens, -1, state.block_key), key)
            own = onset - onset % self.per_bar + state.block_key.clamp_min(0)
            onset = torch.where(inside, own, onset)
        kept = torch.where(onset == state.onset, state.notes, 0)
        state.onset, state.notes = onset, kept + self.note[ids]
        return onset

    def split(self, onset: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """onset -> (bar index, position in the bar, beat in the bar), same shape."""
        pos = onset % self.per_bar
        return onset // self.per_bar, pos, pos // self.per_beat


class MusicalEmbedding(nn.Module):
    """Learned tables of position in bar, beat and bar mod phrase_bars, summed (x sqrt(d_model)).

    Each table starts at std (3 d_model)^-1/2, so their sum is on the token embedding's scale.
    The optional table of notes at the onset (0..MAX_NOTES) starts at zero: added to a trained
    model, it leaves its outputs unchanged until fine-tuning moves it.
    """

    def __init__(
        self, d_model: int, time: MusicalTime, phrase_bars: int, notes: bool = False
    ) -> None:
        super().__init__()
        self.scale, self.phrase_bars = math.sqrt(d_model), phrase_bars
        n_beats = -(-time.per_bar // time.per_beat)
        self.position = nn.Embedding(time.per_bar, d_model)
        self.beat = nn.Embedding(n_beats, d_model)
        self.phrase = nn.Embedding(phrase_bars, d_model)
        for table in (self.position, self.beat, self.phrase):
            nn.init.normal_(table.weight, std=(3 * d_model) ** -0.5)
        self.notes = nn.Embedding(MAX_NOTES + 1, d_model) if notes else None
        if self.notes is not None:
            nn.init.zeros_(self.notes.weight)

    def forward(
        self, bar: Tensor, pos: Tensor, beat: Tensor, notes: Tensor | None = None
    ) -> Tensor:
        """(B, N) each -> (B, N, d_model); `notes` is used when the table exists."""
        out = self.position(pos) + self.beat(beat) + self.phrase(bar % self.phrase_bars)
        if self.notes is not None:
            out = out + self.notes(notes.clamp_max(MAX_NOTES))
        return out * self.scale


class BatchedCodes:
    """SPE codes made for the flattened (B * N) onsets, applied to x (B, N, H, D)."""

    def __init__(self, codes) -> None:
        self.codes = codes

    def project(
        self, x: Tensor, side: str, gate: Tensor | None, dtype: torch.dtype | None = None
    ) -> Tensor:
        b, n, h, d = x.shape
        out = self.codes.project(x.reshape(1, b * n, h, d), side, gate, dtype)  # (1, B N, H, R)
        return out.reshape(b, n, h, -1)


class SumCodes:
    """Token-index and musical-time codes together: (q^1 + q^2) / sqrt(2), same for k.

    The two noises are independent, so the cross terms vanish in expectation and
    E[q^ . k^] = (P_token(m - n) + P_musical(t_m - t_n)) / 2 (times q_d k_d, summed over d).
    """

    def __init__(self, *parts) -> None:
        self.parts = parts

    def project(
        self, x: Tensor, side: str, gate: Tensor | None, dtype: torch.dtype | None = None
    ) -> Tensor:
        out = sum(p.project(x, side, gate, dtype) for p in self.parts)
        return out / math.sqrt(len(self.parts))


class MusicalSineSPE(nn.Module):
    """sineSPE whose positions are onsets in sub-beats (one code per token, batch-dependent)."""

    def __init__(self, cfg, tag: int) -> None:
        super().__init__()
        h, d = cfg.n_heads, cfg.d_model // cfg.n_heads
        self.sine = SineSPE(h, d, cfg.num_realizations, cfg.num_sines, tag)

    def codes(self, onset: Tensor, noise: SPENoise) -> BatchedCodes:
        """onset (B, N) -> codes for queries and keys at those musical times."""
        flat = onset.reshape(-1)
        return BatchedCodes(self.sine.codes(flat, flat, noise))

    def kernel(self, lags: Tensor) -> Tensor:
        """The designed kernel at onset differences: (L,) -> (L, H, D)."""
        return self.sine.kernel(lags)


class MusicalPosition(nn.Module):
    """Everything `model.musical` adds: the time rule, the embedding, musical-time SPE."""

    def __init__(self, cfg, tables, n_layers: int) -> None:
        super().__init__()
        m = cfg.musical
        self.time = MusicalTime(tables)
        self.embed = (
            MusicalEmbedding(cfg.d_model, self.time, m.phrase_bars, m.notes_at_onset)
            if m.embed
            else None
        )
        self.spe = nn.ModuleList()
        if m.spe == "sine_spe":
            n = 1 if cfg.spe_shared else n_layers
            self.spe.extend(MusicalSineSPE(cfg, MUSICAL_TAG + i) for i in range(n))

    @property
    def counts_notes(self) -> bool:
        return self.embed is not None and self.embed.notes is not None

    def embedding(self, onset: Tensor, notes: Tensor | None = None) -> Tensor | None:
        """onset, notes at the onset (B, N) -> (B, N, d_model) to add to the input, or None
        without `embed`."""
        return None if self.embed is None else self.embed(*self.time.split(onset), notes)

    def add_codes(self, codes: list, onset: Tensor, noise: SPENoise) -> list:
        """Per-layer codes with the musical-time codes added (or alone where `codes` has None)."""
        if not len(self.spe):
            return codes
        with torch.autocast(device_type=onset.device.type, enabled=False):
            mus = [spe.codes(onset, noise) for spe in self.spe]
        mus = mus * len(codes) if len(mus) == 1 else mus
        return [m if c is None else SumCodes(c, m) for c, m in zip(codes, mus, strict=True)]


def build_musical(cfg, tables, n_layers: int) -> MusicalPosition | None:
    """The musical-position module `cfg.musical` asks for (None when it is off)."""
    m = cfg.musical
    if not m.embed and m.spe == "none":
        return None
    if tables is None:
        raise MusicgenError(
            "model.musical: needs the tokenizer's time tables (build the model "
            "with its tokenizer: build_model(cfg, tokenizer))"
        )
    if len(tables.bar) != cfg.vocab_size:
        raise MusicgenError(
            f"model.musical: time tables cover {len(tables.bar)} ids, the model {cfg.vocab_size}"
        )
    return MusicalPosition(cfg, tables, n_layers)
