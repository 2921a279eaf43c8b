"""Musical position as model input: time tables vs decoded real songs, parallel == step, the
statistics of SPE in musical time, old checkpoints unchanged, forbidden mass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from musicgen.checkpoint import load_checkpoint, read_payload, save_checkpoint
from musicgen.config import Config, ModelConfig, MusicalConfig, config_from_dict
from musicgen.errors import MusicgenError
from musicgen.evaluate import forbidden_masks, forbidden_mass
from musicgen.model import build_model
from musicgen.model.musical import MusicalSineSPE, SumCodes
from musicgen.model.positional import SineSPE, SPENoise
from musicgen.tokenizers import build_tokenizer

ROOT = Path(__file__).resolve().parents[1]
POP_SONGS = sorted((ROOT / "tests" / "data" / "pop909").glob("*/*.mid"))
DRUMS = sorted(
    (ROOT / "tests" / "data" / "groove_drums" / "drummer1" / "eval_session").glob("*.mid")
)[:3]  # bundled Groove MIDI files (CC BY 4.0)
# shipped before model.musical existed (the POP909 pair was retrained with it on)


@pytest.fixture(scope="module")
def remi():
    return build_tokenizer(ROOT / "configs" / "tokenizer" / "remi.yaml")


@pytest.fixture(scope="module")
def groove():
    return build_tokenizer("groove")


def _remi_walk(names: list[str]) -> list[int]:
    """Reference: onset in sixteenths after each token, read off the token names."""
    bar, pos, out = -1, 0, []
    for name in names:
        if name == "Bar_None":
            bar, pos = bar + 1, 0
        elif name.startswith("Position_"):
            pos = int(name.split("_")[1])
        out.append(max(bar, 0) * 16 + pos)
    return out


def _groove_walk(names: list[str]) -> list[int]:
    """Reference: onset in ticks (12 per beat) after each token, read off the token names."""
    t, out = 0, []
    for name in names:
        if name.startswith("TimeShift_"):
            _, beats, offset = name.split("_")
            t += 12 * int(beats) + int(offset)
        out.append(t)
    return out


@pytest.mark.parametrize("song", POP_SONGS, ids=lambda p: p.name)
def test_remi_onsets_match_token_walk_and_decoded_notes(remi, song):
    ids = np.asarray(remi.encode(song))
    names = [remi.token_name(i) for i in ids]
    tables = remi.time_tables()
    onset = tables.onsets(ids)
    assert onset.tolist() == _remi_walk(names)
    # every decoded note starts at the onset of its Pitch token (miditok's own decoder)
    score = remi.decode(ids)
    per_sub = score.ticks_per_quarter // tables.positions_per_beat
    decoded = sorted((n.time // per_sub, n.pitch) for t in score.tracks for n in t.notes)
    pitch_at = [
        (int(o), int(n.split("_")[1]))
        for o, n in zip(onset, names, strict=True)
        if n.startswith("Pitch_")
    ]
    assert decoded == sorted(pitch_at) and len(decoded) > 500
    assert onset.max() // 16 == names.count("Bar_None") - 1  # bar index of the last token


@pytest.mark.parametrize("song", DRUMS, ids=lambda p: p.name)
def test_groove_onsets_match_token_walk_and_decoded_notes(groove, song):
    ids = np.asarray(groove.encode(song))
    names = [groove.token_name(i) for i in ids]
    onset = groove.time_tables().onsets(ids)
    assert onset.tolist() == _groove_walk(names)
    score = groove.decode(ids)
    scale = score.ticks_per_quarter // 12
    decoded = sorted(
        (k, n.pitch, n.time // scale) for k, t in enumerate(score.tracks) for n in t.notes
    )
    on = [
        (int(groove.tables.track[i]), int(groove.tables.pitch[i]), int(o))
        for i, o, name in zip(ids, onset, names, strict=True)
        if name.startswith("NoteOn_")
    ]
    assert decoded == sorted(on) and len(decoded) > 100
    # bar lines fall between tokens: each bar start (a crop start) is at a whole bar
    starts = groove.bar_starts(ids)
    before = onset - groove.time_tables().shift[ids]
    assert np.all(before[starts] % 48 == 0)


def _tiny(tok, **kw) -> ModelConfig:
    musical = MusicalConfig(**kw.pop("musical", {}))
    base = dict(
        vocab_size=tok.vocab_size,
        n_layers=2,
        d_model=16,
        n_heads=2,
        d_ff=32,
        dropout=0.0,
        n_features=16,
        num_realizations=8,
        num_sines=3,
        chunk_size=8,
        pe="sine_spe",
        gated=True,
        musical=musical,
    )
    base.update(kw)
    return ModelConfig(**base)


def _song_batch(tok, songs, n: int) -> torch.Tensor:
    """Two real songs' first n ids; the second is right-padded from n // 2 (pad id 0)."""
    a, b = (np.asarray(tok.encode(s))[:n] for s in songs[:2])
    b = np.concatenate([b[: n // 2], np.zeros(n - n // 2, np.int64)])
    return torch.tensor(np.stack([a, b]))


def test_model_onsets_parallel_equal_step_and_numpy(remi, groove):
    for tok, songs in ((remi, POP_SONGS), (groove, DRUMS)):
        model = build_model(_tiny(tok, musical={"embed": True}), tok)
        ids = _song_batch(tok, songs, 700)
        par = model.musical.time.onsets(ids)
        state = model.musical.time.init_state(2, "cpu")
        steps = torch.stack([model.musical.time.step(ids[:, t], state) for t in range(700)], 1)
        assert torch.equal(par, steps)
        assert par.tolist() == tok.time_tables().onsets(ids.numpy()).tolist()
        assert par[0, -1] > 4 * tok.time_tables().positions_per_bar  # several bars covered


VARIANTS = [
    dict(musical={"embed": True}),
    dict(musical={"spe": "sine_spe"}),
    dict(musical={"spe": "sine_spe"}, pe="none"),
    dict(musical={"embed": True, "spe": "sine_spe"}, pe="ape"),
    dict(
        musical={"embed": True, "spe": "sine_spe", "phrase_bars": 8}, spe_shared=False, gated=False
    ),
    dict(musical={"embed": True, "notes_at_onset": True}),
]


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
@pytest.mark.parametrize("kind", ["remi", "groove"])
def test_parallel_matches_step_on_real_songs(variant, kind, remi, groove):
    tok, songs = (remi, POP_SONGS) if kind == "remi" else (groove, DRUMS)
    torch.manual_seed(0)
    model = build_model(_tiny(tok, **variant), tok)
    with torch.no_grad():  # not an untrained model: give the musical tables a real effect
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    model.eval()
    ids = _song_batch(tok, songs, 300)
    state = model.init_state(2, "cpu", seed=4)
    with torch.no_grad():
        full = model(ids, noise=state.noise)
        steps = torch.stack([model.step(ids[:, t], state)[0] for t in range(300)], 1)
    assert (steps - full).abs().max() <= 1e-4
    assert state.time.key.shape == (2,)


def _notes_walk(tok, ids: list[int], onsets: list[int]) -> list[int]:
    """Reference: notes read at the current onset after each token (a Python loop)."""
    note = tok.time_tables().note
    out, last, count = [], None, 0
    for i, t in zip(ids, onsets, strict=True):
        count = (count if t == last else 0) + int(note[i])
        last = t
        out.append(count)
    return out


def test_notes_at_onset_parallel_equal_step_and_walk(remi, groove):
    for tok, songs in ((remi, POP_SONGS), (groove, DRUMS)):
        time = build_model(_tiny(tok, musical={"embed": True, "notes_at_onset": True}), tok)
        time = time.musical.time
        ids = _song_batch(tok, songs, 700)
        onset = time.onsets(ids)
        par = time.notes_at_onset(ids, onset)
        state = time.init_state(2, "cpu")
        steps = []
        for t in range(700):
            time.step(ids[:, t], state)
            steps.append(state.notes.clone())
        assert torch.equal(par, torch.stack(steps, 1))
        for b in range(2):
            assert par[b].tolist() == _notes_walk(tok, ids[b].tolist(), onset[b].tolist())
        assert par.max() >= 3  # chords (REMI) or hits at one tick (groove) are counted


def test_notes_at_onset_starts_neutral_and_needs_embed(remi):
    """The zero-initialised table: a trained model given the input is unchanged until trained."""
    torch.manual_seed(0)
    base = build_model(_tiny(remi, musical={"embed": True}), remi).eval()
    more = build_model(_tiny(remi, musical={"embed": True, "notes_at_onset": True}), remi).eval()
    missing, unexpected = more.load_state_dict(base.state_dict(), strict=False)
    assert missing == ["musical.embed.notes.weight"] and unexpected == []
    ids = _song_batch(remi, POP_SONGS, 200)
    noise = base.init_state(2, "cpu", seed=1).noise
    with torch.no_grad():
        assert torch.equal(base(ids, noise=noise), more(ids, noise=noise))
    with pytest.raises(MusicgenError, match="notes_at_onset: needs model.musical.embed"):
        build_model(_tiny(remi, musical={"notes_at_onset": True}), remi)


def test_input_embedding_is_the_walked_bar_position_and_beat(remi):
    """What the first layer sees beyond the token: the tables at the walked (bar, position)."""
    ids = torch.tensor([remi.encode(POP_SONGS[0])[:600]])
    torch.manual_seed(0)
    model = build_model(_tiny(remi, musical={"embed": True, "phrase_bars": 4}), remi).eval()
    onset = torch.tensor([_remi_walk([remi.token_name(int(i)) for i in ids[0]])])
    bar, pos = onset // 16, onset % 16
    emb = model.musical.embed
    want = (emb.position(pos) + emb.beat(pos // 4) + emb.phrase(bar % 4)) * 16**0.5
    with torch.no_grad():
        got = model._inputs(ids, torch.arange(600), model._onsets(ids))
        got = got - model.embed(ids) * 16**0.5  # (1, N, d_model)
    assert torch.allclose(got, want, atol=1e-6)
    assert len(set(bar[0].tolist())) >= 8 and len(set(pos[0].tolist())) >= 12


def _empirical(codes_fn, n: int, draws: int, h: int, d: int) -> torch.Tensor:
    """Mean over noise draws of q^_m . k^_n for one-hot q, k per feature: (D, H, N, N)."""
    eye = torch.eye(d).reshape(d, 1, 1, d).expand(d, n, h, d)  # (D, N, H, D): batch = feature
    acc = torch.zeros(d, h, n, n)
    with torch.no_grad():
        for s in range(draws):
            codes = codes_fn(SPENoise(s, "cpu"))
            acc += torch.einsum(
                "dmhr,dnhr->dhmn", codes.project(eye, "q", None), codes.project(eye, "k", None)
            )
    return acc / draws


def _kernel_at(spe, t: torch.Tensor) -> torch.Tensor:
    lags = (t[:, None] - t[None, :]).flatten()
    with torch.no_grad():
        k = spe.kernel(lags)  # (N * N, H, D)
    return k.reshape(len(t), len(t), _heads(spe), -1).permute(3, 2, 0, 1)  # (D, H, N, N)


def _heads(spe) -> int:
    return spe.sine.h if isinstance(spe, MusicalSineSPE) else spe.h


def _musical_spe(seed: int = 0) -> MusicalSineSPE:
    torch.manual_seed(seed)
    cfg = ModelConfig(n_heads=2, d_model=4, num_realizations=256, num_sines=3)
    spe = MusicalSineSPE(cfg, tag=1000)
    with torch.no_grad():
        spe.sine.freq.normal_(0.0, 1.5)
        spe.sine.phase.uniform_(-3.0, 3.0)
    return spe


ONSETS = torch.tensor([0, 0, 0, 3, 3, 5, 9, 9, 16, 17, 17, 33])  # tokens share onsets


def test_musical_spe_kernel_depends_only_on_onset_difference():
    spe = _musical_spe()
    d = 2
    emp = _empirical(lambda nz: spe.codes(ONSETS.repeat(d, 1), nz), len(ONSETS), 100, 2, d)
    want = _kernel_at(spe, ONSETS)
    assert (emp - want).abs().max() < 0.06 and want.abs().max() > 0.3
    # shifting every onset by a whole number of bars leaves the statistics unchanged
    shifted = _empirical(lambda nz: spe.codes((ONSETS + 160).repeat(d, 1), nz), 12, 100, 2, d)
    assert (shifted - want).abs().max() < 0.06
    # tokens at the same onset get identical codes (one draw, exactly)
    x = torch.randn(1, len(ONSETS), 2, 2)
    q = spe.codes(ONSETS[None], SPENoise(3, "cpu")).project(x[:, [0] * 12], "q", None)
    assert torch.equal(q[0, 0], q[0, 1]) and torch.equal(q[0, 3], q[0, 4])
    assert not torch.allclose(q[0, 0], q[0, 3])


def test_musical_spe_beside_token_spe_sums_the_kernels():
    mus = _musical_spe()
    tok = SineSPE(2, 2, 256, 3, tag=0)
    with torch.no_grad():
        tok.freq.normal_(0.0, 1.5)
    n, d = len(ONSETS), 2
    pos = torch.arange(n)

    def both(nz):
        return SumCodes(tok.codes(pos, pos, nz), mus.codes(ONSETS.repeat(d, 1), nz))

    emp = _empirical(both, n, 150, 2, d)
    want = (_kernel_at(tok, pos) + _kernel_at(mus, ONSETS)) / 2
    assert (emp - want).abs().max() < 0.06


def test_config_errors_and_defaults(remi):
    assert Config().model.musical == MusicalConfig(
        embed=False, phrase_bars=4, spe="none", notes_at_onset=False
    )
    for musical, msg in (
        ({"spe": "conv"}, "model.musical.spe: unknown 'conv'"),
        ({"embed": True, "phrase_bars": 0}, "model.musical.phrase_bars"),
    ):
        with pytest.raises(MusicgenError, match=msg):
            build_model(_tiny(remi, musical=musical), remi)
    with pytest.raises(MusicgenError, match="needs the tokenizer's time tables"):
        build_model(_tiny(remi, musical={"embed": True}))
    with pytest.raises(MusicgenError, match="not available with head 'perceiver_s'"):
        build_model(_tiny(remi, musical={"embed": True}, head="perceiver_s"), remi)
    with pytest.raises(MusicgenError, match="unknown key 'model.musical.pos'"):
        config_from_dict({"model": {"musical": {"pos": True}}})


@pytest.fixture(scope="module")
def pre_musical(tmp_path_factory) -> Path:
    """A groove checkpoint as saved before model.musical existed (no `musical` in its config)."""
    tok = build_tokenizer("groove")
    cfg = Config(name="old", tokenizer="groove", model=_tiny(tok))
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("old") / "old.pt"
    save_checkpoint(path, build_model(cfg.model).eval(), cfg, tok)
    payload = torch.load(path, map_location="cpu", weights_only=True)
    del payload["config"]["model"]["musical"]
    torch.save(payload, path)
    return path


def test_checkpoints_from_before_the_musical_inputs_load_unchanged(pre_musical):
    """Saved before model.musical existed: feature off, same weights, same logits as a model
    built without any tokenizer tables."""
    ckpt = pre_musical
    loaded = load_checkpoint(ckpt)
    assert loaded.config.model.musical == MusicalConfig()
    assert loaded.model.musical is None
    payload = read_payload(ckpt)
    assert set(loaded.model.state_dict()) == set(payload["model"])
    plain = build_model(loaded.config.model)
    plain.load_state_dict({k: v.float() for k, v in payload["model"].items()})
    plain.eval()
    ids = torch.tensor(
        [loaded.tokenizer.encode(POP_SONGS[0] if "pop" in str(ckpt) else DRUMS[0])[:120]]
    )
    state = loaded.model.init_state(1, "cpu", seed=2)
    with torch.no_grad():
        assert torch.equal(loaded.model(ids, noise=state.noise), plain(ids, noise=state.noise))


def test_musical_checkpoint_round_trip(remi, tmp_path):
    cfg = Config()
    cfg.model = _tiny(remi, musical={"embed": True, "spe": "sine_spe"})
    torch.manual_seed(0)
    model = build_model(cfg.model, remi).eval()
    save_checkpoint(tmp_path / "m.pt", model, cfg, remi)
    loaded = load_checkpoint(tmp_path / "m.pt")
    assert "musical.embed.position.weight" in read_payload(tmp_path / "m.pt")["model"]
    ids = torch.tensor([remi.encode(POP_SONGS[1])[:100]])
    state = model.init_state(1, "cpu", seed=0)
    with torch.no_grad():
        assert torch.equal(model(ids, noise=state.noise), loaded.model(ids, noise=state.noise))


class _Fixed(torch.nn.Module):
    """A 'model' whose next-token logits are given: uniform, or one-hot on the true next id."""

    def __init__(self, vocab: int, song: np.ndarray | None = None) -> None:
        super().__init__()
        self.vocab, self.song = vocab, song

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, n = ids.shape
        if self.song is None:
            return torch.zeros(b, n, self.vocab)
        nxt = torch.from_numpy(self.song[1 : n + 1])
        return torch.nn.functional.one_hot(nxt, self.vocab).float()[None] * 100.0


def test_forbidden_mass_uniform_and_perfect_models(remi):
    song = np.asarray(remi.encode(POP_SONGS[2]))[:400]
    masks = forbidden_masks(remi, song)  # (N, V)
    assert not masks[np.arange(len(song) - 1), song[1:]].any()  # real data is never forbidden
    uniform = forbidden_mass(_Fixed(remi.vocab_size), remi, [song], 1000, "cpu")
    after = remi.note_end_mask()[song[:-1]]
    assert uniform["overall"] == pytest.approx(masks.mean())
    assert uniform["after_note"] == pytest.approx(masks[after].mean())
    assert uniform["after_note_positions"] == int(after.sum()) > 20
    kinds = uniform["after_note_by_kind"]  # the same mass, split by the kind of token
    assert sum(kinds.values()) == pytest.approx(uniform["after_note"])
    assert {"Position", "Pitch"} <= set(kinds) and "Duration" in kinds  # no Duration after one
    # after a Duration: only Pitch, Tempo, Chord, later Positions, Bar, EOS are allowed
    dur = np.flatnonzero(after)[0]
    pos_now = int(remi.time_tables().onsets(song[: dur + 1])[-1] % 16)
    forbidden_pos = [remi.token_id(f"Position_{p}") for p in range(pos_now + 1)]
    assert masks[dur, forbidden_pos].all()
    perfect = forbidden_mass(_Fixed(remi.vocab_size, song), remi, [song], 1000, "cpu")
    assert perfect["overall"] < 1e-30 and perfect["positions"] == len(song) - 1


def test_train_generate_and_evaluate_end_to_end(prepared, tmp_path):
    """configs/pop909/tiny.yaml with both musical inputs: train, reload, generate, evaluate."""
    from musicgen.config import load_config
    from musicgen.evaluate import evaluate_nll
    from musicgen.generation.api.request import default_options
    from musicgen.generation.decoding.sample import generate
    from musicgen.train.run import train

    cfg = load_config(
        ROOT / "configs" / "pop909" / "tiny.yaml",
        [
            "model.musical.embed=true",
            "model.musical.spe=sine_spe",
            "train.max_steps=4",
            "train.val_every=4",
        ],
    )
    cfg.data.path = str(prepared)
    result = train(cfg, tmp_path / "run")
    loaded = load_checkpoint(result.last)
    assert loaded.config.model.musical.spe == "sine_spe" and loaded.model.musical is not None
    tok = loaded.tokenizer
    torch.manual_seed(0)
    out = generate(loaded.model, tok, [[tok.bos_id]] * 2, default_options(tok.name), 80)
    assert all(o.errors == 0 and len(o.ids) > 40 for o in out)
    res = evaluate_nll([result.last], prepared, tmp_path / "eval", max_songs=1, max_len=128)
    fm = next(iter(res["models"].values()))["forbidden_mass"]
    assert 0.0 < fm["after_note"] < 1.0 and 0.0 < fm["overall"] < 1.0
    assert fm["positions"] == 128 and fm["after_note_positions"] > 5
    # fine-tune it with the note count added: starts from its weights, trains, reloads alone
    cfg.model.musical.notes_at_onset, cfg.train.init_from = True, str(result.last)
    tuned = load_checkpoint(train(cfg, tmp_path / "tuned").last)
    assert tuned.model.musical.counts_notes and tuned.config.train.init_from == str(result.last)
    out = generate(tuned.model, tok, [[tok.bos_id]] * 2, default_options(tok.name), 80)
    assert all(o.errors == 0 for o in out)


def test_init_from_loads_shared_weights_and_refuses_what_does_not_fit(remi, groove, tmp_path):
    from musicgen.train.run import init_weights

    torch.manual_seed(0)
    src_cfg = Config()
    src_cfg.model = _tiny(remi, musical={"embed": True})
    src = build_model(src_cfg.model, remi)
    save_checkpoint(tmp_path / "src.pt", src, src_cfg, remi, {})
    torch.manual_seed(1)
    dst = build_model(_tiny(remi, musical={"embed": True, "notes_at_onset": True}), remi)
    assert init_weights(dst, str(tmp_path / "src.pt"), remi) == ["musical.embed.notes.weight"]
    theirs, ours = src.state_dict(), dst.state_dict()
    assert all(torch.equal(theirs[k], ours[k]) for k in theirs)
    for model, tok, msg in (
        (build_model(_tiny(remi)), remi, "has weights this model lacks"),  # no musical embed
        (build_model(_tiny(remi, d_model=32, musical={"embed": True}), remi), remi, "do not fit"),
        (dst, groove, "its vocabulary differs from the data's"),
    ):
        with pytest.raises(MusicgenError, match=msg):
            init_weights(model, str(tmp_path / "src.pt"), tok)


def test_presets_switch_embed_on_for_pop909_lm_only():
    """The measured default (docs/model.md): POP909 LM presets embed; the rest stays off."""
    from musicgen.config import load_config

    def musical(name: str) -> MusicalConfig:
        return load_config(ROOT / "configs" / name).model.musical

    for name in ("pop909/small.yaml", "pop909/tiny.yaml", "pop909/ape.yaml"):
        assert musical(name) == MusicalConfig(embed=True, phrase_bars=4, spe="none")
    for name in (
        "pop909/perceiver_tiny.yaml",
        "pop909/perceiver_s.yaml",
        "groove/small.yaml",
        "maestro/perceiver_s.yaml",
        "pop909/musical_compare.yaml",
    ):
        assert musical(name) == MusicalConfig()
