"""What a newcomer uses: model folders (safetensors), the shipped models, presets by name, the
Python API and the README's example."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil

import numpy as np
import pytest
import symusic
import torch
from paths import DATA, ROOT

import musicgen
from musicgen.checkpoint import convert_to_folder, load_checkpoint, read_payload
from musicgen.cli import main
from musicgen.config import load_config
from musicgen.errors import MusicgenError
from musicgen.resources import preset_names, resolve_config

SONG = DATA / "pop909" / "005" / "005.mid"
# sha256 (first 16 hex digits) of the weights of the three shipped checkpoints as trained and
# exported (checkpoints/<name>/model.pt before their conversion to model folders)
SHIPPED_DIGESTS = {
    # the whole-song pop model: the piano sineSPE model continued on the song vocabulary,
    # 30.1 M more training tokens
    "pop909_sine_spe_gated": "798dc22e80764f0d",
    # the POP909 piano pair: 2048-token phrase crops with blocks 1-4 windowed softmax over 1024
    # positions, 31.7 M / 32.2 M training tokens in all
    "pop909_piano_sine_spe_gated": "a446412d732d74cf",
    "pop909_ape": "3dd209d7302e3d9f",
    # the POP909 trio model, phase 2 (training/groove_pop909_phase2): 25.0 M training tokens,
    # the last 9.8 M in crops of 2048
    "groove_sine_spe_gated": "e85c30742bccfd7b",
    # the small Performer with the musical inputs, 15.2 M training tokens
    "maestro_sine_spe_gated": "6a38774c585dbd36",
}


def digest(weights: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for k in sorted(weights):
        t = weights[k].contiguous()
        h.update(k.encode())
        h.update(str(t.dtype).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(SHIPPED_DIGESTS))
def test_shipped_model_folders_hold_the_trained_weights(name):
    folder = ROOT / "checkpoints" / name
    forms = ["forms.json"] if name == "pop909_sine_spe_gated" else []  # `--form auto` draws
    assert sorted(p.name for p in folder.iterdir()) == [
        "README.md",
        "config.json",
        *forms,
        "model.safetensors",
        "tokenizer.json",
    ]
    payload = read_payload(folder)
    assert digest(payload["model"]) == SHIPPED_DIGESTS[name]
    assert json.loads((folder / "config.json").read_text())["format"] == "musicgen-model/1"


@pytest.mark.parametrize("name", ["pop909_ape", "pop909_piano_sine_spe_gated"])
def test_shipped_pop909_models_know_the_bar_and_keep_spe_in_float32(name):
    """The POP909 piano pair: musical-position embeddings and the note count at the onset
    on, blocks 1-4 windowed softmax over 1024 positions with rotary positions, 2048-token phrase
    crops, the sampling defaults the form benchmark chose; SPE parameters and gates stored in
    float32, every other weight in float16."""
    loaded = load_checkpoint(ROOT / "checkpoints" / name)
    assert loaded.config.model.musical.embed and loaded.model.musical is not None
    assert loaded.model.musical.counts_notes and loaded.tokenizer.options["merge_duplicates"]
    assert loaded.config.data.start_bar_every == 4 and loaded.config.data.crop_len == 2048
    m = loaded.config.model
    assert m.local_layers == [1, 2, 3, 4] and m.local_window == 1024 and m.local_rope
    s = loaded.config.sample
    # the copy rule on the phrase lags, as the sweep chose it
    repeat = {"pop909_piano_sine_spe_gated": 4.0, "pop909_ape": 3.5}[name]
    assert (s.temperature, s.top_p, s.repeat) == (1.0, 0.9, repeat)
    stored = read_payload(ROOT / "checkpoints" / name)["model"]
    keep = {k for k in stored if k.startswith("spe.") or k.endswith(".gate")}
    assert (len(keep) > 0) == (name != "pop909_ape")
    assert all(stored[k].dtype == torch.float32 for k in keep)
    assert all(v.dtype == torch.float16 for k, v in stored.items() if k not in keep)


def test_shipped_maestro_model_knows_the_window_on_expressive_remi():
    """The plain Performer head with the musical inputs (position in the window,
    beat, window mod 4, notes at the onset) on the expressive REMI (pedal folded, 16 positions
    per beat); its card states the CC BY-NC-SA licence and the acceptance table."""
    loaded = load_checkpoint(ROOT / "checkpoints" / "maestro_sine_spe_gated")
    m = loaded.config.model
    assert m.head == "lm" and m.pe == "sine_spe" and m.gated
    assert m.musical.embed and loaded.model.musical.counts_notes
    assert loaded.tokenizer.options["fold_pedal"]
    assert loaded.tokenizer.options["positions_per_beat"] == 16
    card = (ROOT / "checkpoints" / "maestro_sine_spe_gated" / "README.md").read_text()
    assert "CC BY-NC-SA 4.0" in card and "non-commercial" in card
    assert "## Acceptance, measured on the held-out performances" in card


def test_pt_to_folder_is_bit_identical_and_loads_the_same(tiny_checkpoints, tmp_path):
    pt = tiny_checkpoints["remi"]
    folder = convert_to_folder(pt, tmp_path / "tiny_remi")
    a, b = read_payload(pt), read_payload(folder)
    assert a["model"].keys() == b["model"].keys()
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    as_json = lambda d: json.loads(json.dumps(d))  # noqa: E731 - JSON keeps tuples as lists
    assert as_json(a["config"]) == b["config"] and as_json(a["tokenizer"]) == b["tokenizer"]
    la_, lb_ = load_checkpoint(pt), load_checkpoint(folder)
    assert la_.tokenizer.to_dict() == lb_.tokenizer.to_dict() and la_.config == lb_.config
    ma, mb = la_.model, lb_.model
    ids = torch.tensor([[1, 4, 5, 6, 7]])
    torch.manual_seed(0)
    la = ma(ids)
    torch.manual_seed(0)
    assert torch.equal(la, mb(ids))


def test_every_command_accepts_a_model_folder(tiny_checkpoints, tmp_path, capsys):
    folder = convert_to_folder(tiny_checkpoints["remi"], tmp_path / "tiny_remi")
    out = tmp_path / "out"
    assert (
        main(
            [
                "generate",
                "--checkpoint",
                str(folder),
                "--out",
                str(out),
                "--num",
                "1",
                "--max-tokens",
                "24",
                "--seed",
                "1",
                "--save-tokens",
            ]
        )
        == 0
    )
    assert (out / "tiny_remi_1_0.mid").is_file()
    assert (
        main(
            [
                "continue",
                "--checkpoint",
                str(folder),
                "--prompt",
                str(SONG),
                "--out",
                str(out),
                "--num",
                "1",
                "--max-tokens",
                "16",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "export",
                str(out / "tiny_remi_1_0.json"),
                "--checkpoint",
                str(folder),
                "-o",
                str(out / "again.mid"),
            ]
        )
        == 0
    )
    capsys.readouterr()


def test_broken_model_folders_are_one_line_errors(tiny_checkpoints, tmp_path, capsys):
    folder = convert_to_folder(tiny_checkpoints["remi"], tmp_path / "m")
    (folder / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(MusicgenError, match="model.safetensors: not readable"):
        load_checkpoint(folder)
    (folder / "tokenizer.json").unlink()
    assert main(["generate", "--checkpoint", str(folder), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "model folder lacks tokenizer.json" in err and err.count("\n") == 1


def test_presets_by_name():
    assert resolve_config("pop909/small") == ROOT / "configs" / "pop909" / "small.yaml"
    assert load_config("pop909/small") == load_config(ROOT / "configs" / "pop909" / "small.yaml")
    assert load_config("groove/tiny.yaml").tokenizer == "groove"
    assert "pop909/sine_spe_gated" in preset_names()
    with pytest.raises(MusicgenError, match=r"pop909/nope: config file not found.*pop909/small"):
        load_config("pop909/nope")


def test_api_results(tiny_checkpoints, tmp_path):
    m = musicgen.load(tiny_checkpoints["remi"])
    piece = m.generate(bars=2, seed=3)
    again = m.generate(bars=2, seed=3)
    assert piece.ids == again.ids and piece.seed == 3  # a seed gives the same piece
    path = piece.save(tmp_path / "x.mid")
    back = symusic.Score(str(path))
    assert back.note_num() == piece.to_score().note_num() == piece.score.note_num()
    roll = piece.piano_roll()
    assert roll.shape[0] == 128 and roll.dtype == np.uint8
    notes = piece.to_score().to("quarter")
    for n in notes.tracks[0].notes:
        assert roll[n.pitch, int(round(n.time * 4))] > 0
    wav = piece.save_audio(tmp_path / "a" / "x.wav")
    assert wav.read_bytes()[:4] == b"RIFF" and sorted(os.listdir(tmp_path / "a")) == ["x.wav"]
    cont = m.continue_midi(SONG, bars=2, seed=1, max_tokens=16)
    assert cont.prompt_len > 1 and cont.stop in ("end", "max_tokens")
    scored = m.score(SONG)
    from musicgen.generation.api.prompt import encode_song

    annotated = encode_song(m.tokenizer, SONG)  # the chord_midi.txt beside it, as in training
    assert scored["tokens"] == len(annotated) - 1 > len(m.tokenizer.encode(SONG)) - 1
    assert scored["notes"] == m.tokenizer.decode(annotated).note_num()
    assert scored["nll_per_token"] > 0 and scored["nll_per_note"] > scored["nll_per_token"]
    with pytest.raises(MusicgenError, match="nope: checkpoint not found"):
        musicgen.load(tmp_path / "nope")


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    code = readme_example()
    assert len(code.strip().splitlines()) == 5
    shutil.copy(SONG, tmp_path / "song.mid")
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(code, "README.md", "exec"), ns)  # the README's own example
    assert symusic.Score("new.mid").note_num() > 0
    prompt = ns["m"].prompt("song.mid", bars=2)  # continued.mid starts with these notes
    head = [
        (n.time, n.duration, n.pitch)
        for t in symusic.Score("continued.mid").tracks
        for n in t.notes
        if n.time < prompt.end_tick
    ]
    assert sorted(head) == sorted(
        (n.time, n.duration, n.pitch) for t in prompt.notes.tracks for n in t.notes
    )
    assert float(capsys.readouterr().out.strip().splitlines()[-1]) > 0
