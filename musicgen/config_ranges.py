"""The ranges of a typed config: the checks its types cannot express, run on every loaded config,
checkpoint and model folder before anything is allocated (`validate`, `validate_model`, the model
size cap `MAX_PARAMETERS` with `parameter_estimate`). Re-exported by `musicgen.config`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from musicgen.errors import MusicgenError, check_choice, check_range, check_seed

if TYPE_CHECKING:
    from musicgen.config import Config, ModelConfig


PRECISIONS = ("auto", "fp32", "bf16", "fp16")
HEADS = ("lm", "perceiver_s")
NORMS = ("pre", "post")
COMBINES = ("sum", "sequential")
MAX_WORKERS = 256  # worker processes of one command (data.workers, prepare --workers)
MAX_PARAMETERS = 2_000_000_000  # 8 GB of float32 weights: 25 x the paper's 80 M model
# model sizes: (field, low, high), checked before anything is allocated (a config.json saying
# 10**6 layers must fail in one line, not in the OOM killer)
MODEL_RANGES = (
    ("vocab_size", 0, 65536),  # the prepared layout stores uint16 ids
    ("n_layers", 1, 256),
    ("d_model", 1, 16384),
    ("n_heads", 1, 256),
    ("d_ff", 1, 131072),
    ("max_len", 1, 1 << 20),
    ("num_sines", 1, 1024),
    ("kernel_size", 1, 1 << 16),
    ("num_realizations", 1, 4096),
    ("n_features", 1, 16384),
    ("chunk_size", 1, 1 << 16),
    ("local_window", 1, 1 << 20),
    ("redraw_every", 1, None),
)
SCHEDULES = ("cosine", "constant")
PERCEIVER_CROSS = ("both", "full")
SEGMENTATIONS = ("effective", "uniform")


def validate(cfg: Config) -> Config:
    """Range checks the types cannot express; each message names the field and its valid range."""
    d, o, t = cfg.data, cfg.optim, cfg.train
    for where, value, low in (
        ("data.crop_len", d.crop_len, 2),
        ("data.workers", d.workers, 0),
        ("data.start_bar_every", d.start_bar_every, 1),
        ("optim.warmup_steps", o.warmup_steps, 0),
        ("train.batch_size", t.batch_size, 1),
        ("train.grad_accum", t.grad_accum, 1),
        ("train.max_steps", t.max_steps, 0),
        ("train.val_every", t.val_every, 1),
        ("train.val_songs", t.val_songs, 0),
        ("train.val_max_len", t.val_max_len, 2),
        ("train.ckpt_every", t.ckpt_every, 1),
        ("train.keep_last", t.keep_last, 0),
        ("log.every", cfg.log.every, 1),
        ("optim.min_lr", o.min_lr, 0),
        ("optim.weight_decay", o.weight_decay, 0),
        ("train.max_minutes", t.max_minutes, 0),
    ):
        check_range(f"config: {where}", value, low)
    check_range("config: optim.lr", o.lr, 0, low_open=True)
    check_range("config: optim.grad_clip", o.grad_clip, 0, low_open=True)
    check_range("config: data.drop_instrument_p", d.drop_instrument_p, 0, 1)
    check_seed("config: train.seed", t.seed)
    check_choice("config: train.precision", t.precision, PRECISIONS)
    check_choice("config: optim.schedule", o.schedule, SCHEDULES)
    check_choice("config: model.perceiver.cross", cfg.model.perceiver.cross, PERCEIVER_CROSS)
    check_choice(
        "config: model.perceiver.segmentation", cfg.model.perceiver.segmentation, SEGMENTATIONS
    )
    validate_model(cfg.model)
    check_range("config: data.crop_len", d.crop_len, 2, 1 << 20)
    check_range("config: train.val_max_len", t.val_max_len, 2, 1 << 22)
    check_range("config: train.batch_size", t.batch_size, 1, 1 << 16)
    check_range("config: data.workers", d.workers, 0, MAX_WORKERS)
    if len(o.betas) != 2 or not all(0 <= b < 1 for b in o.betas):
        raise MusicgenError(f"config: optim.betas: must be two values in [0, 1), got {o.betas}")
    if len(d.transpose) != 2 or d.transpose[0] > d.transpose[1]:
        raise MusicgenError(
            f"config: data.transpose: must be two semitone values [low, high] with low <= high "
            f"(e.g. [-6, 6]; [0, 0] for none), got {d.transpose}"
        )
    return cfg


def parameter_estimate(m: ModelConfig) -> int:
    """About how many parameters the model has (attention and feed-forward blocks, the token
    embedding and head): what the size cap and `memory`'s estimates count."""
    per_layer = 4 * m.d_model**2 + 2 * m.d_model * m.d_ff
    return m.n_layers * per_layer + 2 * max(m.vocab_size, 1) * m.d_model


def validate_model(m: ModelConfig) -> None:
    """Sizes and choices of the model, with an estimate of its parameter count, so that a
    hostile or mistyped config is refused before the model allocates anything."""
    for name, low, high in MODEL_RANGES:
        check_range(f"config: model.{name}", getattr(m, name), low, high)
    check_range("config: model.dropout", m.dropout, 0, 1)
    check_range("config: model.redraw_prob", m.redraw_prob, 0, 1)
    check_range("config: model.perceiver.context_len", m.perceiver.context_len, 1, 1 << 20)
    check_range("config: model.perceiver.n_queries", m.perceiver.n_queries, 1, 1 << 20)
    check_range("config: model.musical.phrase_bars", m.musical.phrase_bars, 1, 1024)
    check_choice("config: model.head", m.head, HEADS)
    check_choice("config: model.norm", m.norm, NORMS)
    check_choice("config: model.perceiver.combine", m.perceiver.combine, COMBINES)
    if m.d_model % m.n_heads:
        raise MusicgenError(
            f"config: model.n_heads: d_model {m.d_model} is not divisible by {m.n_heads} heads"
        )
    estimate = parameter_estimate(m)
    if estimate > MAX_PARAMETERS:
        raise MusicgenError(
            f"config: model: about {estimate / 1e9:,.1f} billion parameters (n_layers "
            f"{m.n_layers} x d_model {m.d_model}, d_ff {m.d_ff}) > the limit of "
            f"{MAX_PARAMETERS / 1e9:g} billion"
        )
