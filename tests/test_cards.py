"""The model cards' library (musicgen.cards): the training summary an export keeps, and a card
rendered from a model folder and evaluation JSON, every number taken from those files."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest
from paths import ROOT

from musicgen.cards import export_summary, render_card, write_cards
from musicgen.cards.render import training_text
from musicgen.cards.summary import run_summary
from musicgen.checkpoint import load_checkpoint, save_checkpoint
from musicgen.config import config_from_dict
from musicgen.train.log import records_text

# a one-phase model folder that stays in the repository: the groove model's committed phase 1
GROOVE_PHASE1 = ROOT / "training" / "groove_pop909_phase1" / "groove_small"


@pytest.fixture
def groove(tmp_path_factory):
    """Phase 1's folder under the shipped model's name (the card's title) with the sampling
    defaults it shipped with: a one-phase model."""
    folder = tmp_path_factory.mktemp("shipped") / "groove_sine_spe_gated"
    shutil.copytree(GROOVE_PHASE1, folder)
    stored = json.loads((folder / "config.json").read_text())
    stored["config"]["sample"] |= {"temperature": 1.1, "top_p": 0.95}
    (folder / "config.json").write_text(json.dumps(stored))
    return folder


def card_text():
    """The shipped cards' prose, from the script that writes them."""
    path = ROOT / "scripts" / "reproduce" / "write_model_cards.py"
    spec = importlib.util.spec_from_file_location("write_model_cards", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TEXT


def segments(*means: float) -> list[dict]:
    return [{"mean": m, "std": 0.01} for m in means]


def groove_eval(ev, groove):
    """The files evaluate_shipped.sh leaves for the groove model, with made-up numbers."""
    export = {"step": 1250, "steps_trained": 1500, "train_minutes": 87.0}
    export |= {"tokens_trained": 3_072_000, "tokens_per_s": 588}
    (ev / "groove_sine_spe_gated.export.json").write_text(json.dumps(export))
    entry = {"checkpoint": str(groove), "mean_within": 2.5191, "mean_beyond": 2.5344}
    nll = {"songs": 30, "models": {"sine_spe+gate (g)": entry | {"max_len": 2048}}}
    (ev / "groove_nll").mkdir()
    (ev / "groove_nll" / "nll.json").write_text(json.dumps(nll))
    style = {
        "sampling": {"temperature": 0.6},
        "songs": ["a", "b"],
        "samples": 2,
        "max_tokens": 1024,
        "summary": {"time_pitch": segments(0.299, 0.252, 0.232, 0.220)},
        "reference_summary": {"time_pitch": segments(0.865, 0.864, 0.869, 0.851)},
    }
    (ev / "groove_style").mkdir()
    (ev / "groove_style" / "style.json").write_text(json.dumps(style))

    def band(pieces: int, share: float, drums: float) -> dict:
        spread = {"mean": 1.0, "std": 0.0}
        measures = {k: spread for k in ("bass_bars", "third_bars", "drum_hits_per_bar")}
        measures |= {"drum_pitches": {"mean": drums, "std": 1.5}, "longest_note_bars": spread}
        return {"pieces": pieces, "band_share": share, "measures": measures}

    music = {"band": {"generated": band(24, 0.9583, 7.1), "reference": band(787, 0.999, 7.2)}}
    (ev / "band_groove").mkdir()
    (ev / "band_groove" / "music.json").write_text(json.dumps(music))


def test_groove_card_quotes_the_numbers_of_its_files(tmp_path, groove):
    groove_eval(tmp_path, groove)
    card = render_card(groove, tmp_path, card_text(), ROOT)
    assert card.startswith("# groove_sine_spe_gated\n\nA groove (bass, drums, piano) model: ")
    assert "4 layers, d_model 256" in card and "groove tokens (vocabulary 795)" in card
    assert "1500 steps of batch 4 x 512 tokens, 3.1 M tokens (Adam" in card  # no POP909 ratio
    assert "87.0 minutes of wall time on a 2-core CPU, 588 tokens/s" in card
    assert "(step 1250)" in card
    assert "| sine_spe+gate (g) | 30 | 2.519 | 2.534 |" in card
    assert "(0-512) | beyond it (512-2048) |" in card
    assert "| time_pitch, sampled | 0.299 ± 0.010 | 0.252 ± 0.010 |" in card
    assert "unrelated" not in card  # a style.json from before the other-song baseline
    assert "24 pieces from scratch (T = 1.1, top-p 0.95, grammar on) against the test" in card
    assert "| drum pitches | 7.1 ± 1.5 | 7.2 ± 1.5 |" in card
    assert "| bars where the piano sounds | 100 % ± 0 % | 100 % ± 0 % |" in card
    assert "| plays as a band | 96 % | 99.9 % |" in card
    assert "## Music statistics" not in card  # no music.json for this model
    assert card.endswith(
        "python scripts/reproduce/write_model_cards.py groove_sine_spe_gated\n```\n"
    )


def test_write_cards_writes_each_folders_readme(tmp_path, groove):
    groove_eval(tmp_path, groove)
    root = tmp_path / "root"
    shutil.copytree(groove, root / "checkpoints" / groove.name)
    [path] = write_cards(root, [groove.name], tmp_path, card_text())
    assert path == root / "checkpoints" / groove.name / "README.md"
    assert path.read_text() == render_card(groove, tmp_path, card_text(), ROOT)


def test_run_summary_adds_up_resumed_runs(tmp_path):
    log = [
        {"kind": "train", "step": 10, "time": 60.0, "loss": 3.0},
        {"kind": "val", "step": 10, "loss": 2.9},
        {"kind": "train", "step": 20, "time": 120.0, "loss": 2.5},
        {"kind": "train", "step": 30, "time": 30.0, "loss": 2.0},  # resumed: the clock restarts
        {"kind": "val", "step": 30, "loss": 2.4},
    ]
    (tmp_path / "log.jsonl").write_text(records_text(log))
    s = run_summary(tmp_path, step=30, tokens_per_step=100)
    assert s["steps_trained"] == 30 and s["tokens_trained"] == 3000
    assert s["train_minutes"] == 2.5 and s["tokens_per_s"] == 20  # 3000 tokens / 150 s
    assert s["best_validation"]["step"] == 30 and s["final_train_loss"] == 2.0


def test_export_summary_follows_init_from(tmp_path, groove):
    """A fine-tune of a run: the run's log is summarised, and its config kept with it."""
    cfg = load_checkpoint(groove).config
    assert not cfg.train.init_from
    base = tmp_path / "base"  # a run folder: its checkpoint and its log
    base.mkdir()
    loaded = load_checkpoint(groove)
    save_checkpoint(base / "best.pt", loaded.model, loaded.config, loaded.tokenizer)
    (base / "log.jsonl").write_text(
        records_text([{"kind": "train", "step": 5, "time": 6.0, "loss": 2}])
    )
    run = tmp_path / "run"
    run.mkdir()
    (run / "log.jsonl").write_text(
        records_text([{"kind": "train", "step": 7, "time": 6.0, "loss": 1}])
    )
    cfg.train.init_from = str(base / "best.pt")
    info = export_summary(run, cfg, step=7)
    crop = cfg.train.batch_size * cfg.train.grad_accum * cfg.data.crop_len
    assert info["tokens_trained"] == 7 * crop and info["step"] == 7
    base_info = info["init_from"]
    assert base_info["path"] == str(base / "best.pt") and "init_from" not in base_info
    assert base_info["tokens_trained"] == 5 * crop and base_info["step"] == 0
    assert config_from_dict(base_info["config"]) == loaded.config


def test_a_fine_tune_of_a_shipped_folder_keeps_its_shipped_summary_and_config(tmp_path, groove):
    """Continuing from a committed model folder (no run folder): the folder's own
    summary is the phase before, with its config, so the card needs neither the run nor the
    folder, which the new model replaces."""
    loaded = load_checkpoint(groove)
    stored = json.loads(loaded.train_state["summary"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "log.jsonl").write_text(
        records_text([{"kind": "train", "step": 3, "time": 6.0, "loss": 1}])
    )
    cfg = load_checkpoint(groove).config
    cfg.train.init_from = str(groove)
    info = export_summary(run, cfg, step=3)
    base_info = info["init_from"]
    assert base_info["steps_trained"] == stored["steps_trained"] == 7400
    assert base_info["train_minutes"] == stored["train_minutes"] and base_info["step"] == 0
    assert config_from_dict(base_info["config"]) == loaded.config
    # the card describes both phases from the summary alone (the folder's path is not read)
    text = card_text()
    cfg.data.path = "data/prepared/trio"
    paragraph = training_text(cfg, info, text, tmp_path / "elsewhere")
    assert paragraph.startswith("2 phases. Phase 1, `groove_small` (configs/groove/small.yaml")
    assert "7400 steps of batch 4 x 512 tokens" in paragraph and "3 steps of" in paragraph


def test_maestro_acceptance_checks_each_target_against_the_real_performances(tmp_path):
    """The MAESTRO acceptance table: forbidden mass from nll.json (the replaced model's too, scored
    beside it), texture from music.json against its reference, the replaced model's texture
    quoted; each row says met or not met."""
    from musicgen.cards.acceptance import maestro_acceptance

    def entry(path: str, after: float, per_note: float) -> dict:
        fm = {"after_note": after, "after_note_by_kind": {"Position": after / 2}}
        return {"checkpoint": path, "max_len": 2048, "nll_per_note": per_note, "forbidden_mass": fm}

    nll = {"songs": 60, "models": {"a": entry("checkpoints/m", 0.028, 11.0)}}
    nll["models"]["b"] = entry("out/eval/previous/old", 0.333, 13.07)
    (tmp_path / "maestro_nll").mkdir()
    (tmp_path / "maestro_nll" / "nll.json").write_text(json.dumps(nll))

    def stats(**means: float) -> dict:
        return {k: {"mean": v, "std": 0.0} for k, v in means.items()}

    music = {
        "generated": stats(notes_per_onset=1.95, scale_consistency=0.85, stacked_onset_rate=0.004),
        "reference": stats(notes_per_onset=1.61, scale_consistency=0.894, stacked_onset_rate=0.0),
    }
    (tmp_path / "music_m").mkdir()
    (tmp_path / "music_m" / "music.json").write_text(json.dumps(music))
    text = card_text()
    text.previous_documented["m"] = {"name": "old", "stacked": "9.6 % (its card)"}
    table = "\n".join(maestro_acceptance("m", tmp_path, text))
    assert "| ≤ 5 % | 2.8 % (Position 1.40 %) (met) | 33.3 % (Position 16.65 %) |" in table
    assert "| ≤ 1 % | 0.4 % (met) | 9.6 % (its card) |" in table
    assert "| within 20 % of the real 1.61 | 1.95 (not met) |" in table  # +21 %
    assert "| within 0.05 of the real 0.894 | 0.850 (met) |" in table
    assert "| 11.00 | 13.07 (same performances and tokens) |" in table


def test_paired_note_signs_the_difference_for_the_model_and_says_when_it_is_noise():
    """The pop card's 'beyond' row: this model minus its twin, per song with its CI, whichever
    order nll.json paired them in; a CI across 0 is called noise."""
    from musicgen.cards.acceptance import _paired_note

    me, twin = {"mean_beyond": 1.587}, {"mean_beyond": 1.588}
    paired = {"beyond": {"mean": 0.001, "low": -0.003, "high": 0.005, "n": 38}}
    nll = {"models": {"spe": me, "ape": twin}, "paired": {"ape - spe": paired}}
    assert _paired_note(nll, me, twin) == (
        "; per song -0.0010 [-0.0050, +0.0030], 38 songs (within noise)"
    )
    paired["beyond"] |= {"low": 0.0005}
    assert _paired_note(nll, twin, me) == "; per song +0.0010 [+0.0005, +0.0050], 38 songs"
    assert _paired_note({"models": nll["models"]}, me, twin) == ""
