"""scripts/reproduce/export_checkpoint.py on a model folder: how a training committed in parts
(training/pop909_phase7/<name>) is shipped with its sampling defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from musicgen.checkpoint import convert_to_folder, load_checkpoint, read_payload, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def test_a_model_folder_ships_with_its_summary_and_the_set_values(tiny_checkpoints, tmp_path):
    loaded = load_checkpoint(tiny_checkpoints["remi"])
    summary = {"step": 7, "tokens_trained": 1234, "init_from": {"step": 3}}
    pt = save_checkpoint(
        tmp_path / "phase.pt",
        loaded.model,
        loaded.config,
        loaded.tokenizer,
        train_state={"step": 7, "summary": json.dumps(summary)},
        half=True,
    )
    folder = convert_to_folder(pt, tmp_path / "training" / "tiny")
    out = tmp_path / "shipped"
    script = ROOT / "scripts" / "reproduce" / "export_checkpoint.py"
    cmd = [sys.executable, str(script), str(folder), str(out), "--set", "sample.repeat=3.0"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True)
    printed = json.loads(done.stdout)
    assert {k: printed[k] for k in summary} == summary
    shipped = load_checkpoint(out / "model.pt")
    assert shipped.config.sample.repeat == 3.0
    assert shipped.config.model == loaded.config.model
    assert json.loads(shipped.train_state["summary"]) == summary
    a, b = read_payload(folder)["model"], read_payload(out / "model.pt")["model"]
    assert a.keys() == b.keys()
    assert all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)
