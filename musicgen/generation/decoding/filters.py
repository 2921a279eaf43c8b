"""Pure filters over a batch of logits (`[B, V]`), each testable on a hand-made distribution.

Their order matters (`filter_logits`): temperature, then a grammar's choice bonus (kept within
its group, `choose_within`), then the additive bonus (the bar-copy rule's `repeat` and a
grammar's own, in nats of the tempered distribution), then the grammar's redirects (the mass of
ids it forbids moved to the ids it means), then the grammar mask (disallowed ids to -inf), then
top-k and top-p, so that the kept set is never empty as long as the grammar allows something.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from musicgen.device import as_dtype
from musicgen.generation.rules.base import Option
from musicgen.limits import Range

if TYPE_CHECKING:
    from musicgen.generation.decoding.sample import SamplingOptions

Redirect = tuple[torch.Tensor, torch.Tensor]  # (source ids, target ids) of one row

NEG_INF = float("-inf")

# the options of plain decoding, declared once (`generation.api.options` gathers every option);
# `paper`: the settings of the SPE paper's music experiments (Liutkus et al., ICML 2021) per
# tokenizer, where a model's config says nothing
DECODING = (
    Option(
        "temperature",
        1.0,
        Range(0.01, 100.0, zero=True, note="0 = greedy"),
        "sampling temperature",
        studio=True,
        slider=(0.0, 2.0, 0.05),
        words="Adventure: Higher: bolder, more surprising notes; lower: safer, more "
        "predictable ones.",
        short="T",
        card="T = {:g}",
        card_always=True,
        paper=(("remi", 1.2), ("groove", 0.6)),
    ),
    Option(
        "top_k",
        0,
        Range(0, None, integer=True, note="0 = off"),
        "keep the K likeliest ids",
        kind=int,
        studio=True,
        words="Note choices considered: How many of the likeliest next notes the model chooses "
        "among; 0: all of them.",
        short="k",
        card="top-k {}",
    ),
    Option(
        "top_p",
        1.0,
        Range(0.001, 1.0, note="1 = off"),
        "nucleus mass",
        studio=True,
        slider=(0.05, 1.0, 0.01),
        words="Focus: Lower keeps the music to the notes the model is surest of; 1: no limit.",
        short="p",
        card="top-p {:g}",
        paper=(("remi", 0.9),),
    ),
    Option("grammar", True, None, "do not mask invalid tokens (ablation)", kind=bool),
)


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide by T > 0 (T = 0, greedy, is handled in `filter_logits` after the grammar mask)."""
    if temperature <= 0:
        raise ValueError("apply_temperature needs T > 0")
    return logits / temperature


def mask_disallowed(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Set disallowed ids to -inf; a row where nothing is allowed is left as it is."""
    if allowed.dtype != torch.bool or allowed.device != logits.device:
        allowed = allowed.to(device=logits.device, dtype=torch.bool)
    blocked = allowed.logical_not().logical_and_(allowed.any(dim=-1, keepdim=True))
    return logits.masked_fill(blocked, NEG_INF)


def choose_within(logits: torch.Tensor, bonus: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """`logits` plus `bonus` ([B, V] nats), lowered on each row's `group` ids (bool [B, V]) by the
    one amount that leaves the group's total probability as `logits` gave it. A soft rule then
    chooses inside the group without choosing the group over the rest: with the Pitch ids as
    the group, the chord tones pick which pitch a note takes, while whether another note joins
    the onset (a Pitch) or the piece moves on (a Position) stays the model's choice. Added
    plainly, the nats make another note likelier after every note, and the notes pile up. A
    row whose group has no probability takes the bonus as it is."""
    inside = logits.masked_fill(group.logical_not(), NEG_INF)
    before = torch.logsumexp(inside, dim=-1, keepdim=True)
    after = torch.logsumexp(inside + bonus, dim=-1, keepdim=True)
    shift = torch.where(torch.isfinite(before), after - before, torch.zeros_like(before))
    return logits + bonus - shift * group


def redirect_mass(logits: torch.Tensor, row: int, sources: torch.Tensor, targets: torch.Tensor):
    """In place: add the probability of `sources` to `targets` of one row, shared as the targets'
    own probabilities are (the sources keep theirs; the grammar mask removes them). Drawing from
    the result is drawing from the row and reading a source drawn as one of the targets."""
    x = logits[row]
    moved = torch.logsumexp(x[sources], dim=0)
    share = torch.log_softmax(x[targets], dim=0)
    x[targets] = torch.logaddexp(x[targets], moved + share)


def greedy_filter(logits: torch.Tensor) -> torch.Tensor:
    """Keep only the maximum of each row (ties all kept)."""
    best = logits.max(dim=-1, keepdim=True).values
    return logits.masked_fill(logits < best, NEG_INF)


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row (k = 0 or k >= V: no-op; ties at the k-th kept)."""
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # [B, 1]
    return logits.masked_fill(logits < kth, NEG_INF)


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus: keep the smallest set of most likely ids whose probability reaches p.

    An id is dropped when the mass of the ids ranked before it is already >= p, so the most
    likely id is always kept.
    """
    if p >= 1:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # [B, V]
    probs = torch.softmax(as_dtype(sorted_logits, torch.float32), dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs
    drop_sorted = mass_before >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to id order (every id written)
    return logits.masked_fill(drop, NEG_INF)


def filter_logits(
    logits: torch.Tensor,
    options: SamplingOptions,
    allowed: torch.Tensor | None = None,
    bonus: torch.Tensor | None = None,
    choice: tuple[torch.Tensor, torch.Tensor] | None = None,
    redirects: list[list[Redirect]] | None = None,
) -> torch.Tensor:
    """Temperature, the grammar's `choice` ((nats, group), `choose_within`, its group taken
    among the allowed ids), the additive `bonus` ([B, V]: the grammar's own and the bar-copy
    rule's), each row's `redirects` (`redirect_mass`), grammar mask, then top-k and top-p: the
    logits to sample from, [B, V]."""
    logits = as_dtype(logits, torch.float32)
    if options.temperature > 0:
        logits = apply_temperature(logits, options.temperature)
    if choice is not None:
        nats, group = (t.to(logits.device) for t in choice)
        group = group if allowed is None else group & allowed.to(logits.device, torch.bool)
        logits = choose_within(logits, nats, group)
    if bonus is not None:
        logits = logits + bonus.to(logits.device)
    if redirects is not None and any(redirects):
        logits = logits.clone()  # a tempered view may share the model's storage at T = 1
        for row, pairs in enumerate(redirects):
            for sources, targets in pairs:
                redirect_mass(logits, row, sources.to(logits.device), targets.to(logits.device))
    if allowed is not None:
        logits = mask_disallowed(logits, allowed)
    if options.temperature == 0:
        return greedy_filter(logits)
    logits = top_k_filter(logits, options.top_k)
    return top_p_filter(logits, options.top_p)


def sample_from_logits(
    logits: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Draw one id per row from softmax(logits): [B, V] -> [B]."""
    probs = torch.softmax(as_dtype(logits, torch.float32), dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
