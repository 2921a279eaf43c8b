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


def test_a_run_whose_start_is_gone_ships_with_the_base_folders_chain(tiny_checkpoints, tmp_path):
    """A phase trained from a run folder since removed: without `--base` the export stops with
    one line naming what is missing; with the folder that run was shipped as, its chain is the
    new phase's previous one."""
    from dataclasses import replace

    loaded = load_checkpoint(tiny_checkpoints["remi"])
    base = convert_to_folder(
        save_checkpoint(tmp_path / "base.pt", loaded.model, loaded.config, loaded.tokenizer,
                        train_state={"step": 9, "summary": json.dumps({"step": 9})}, half=True),
        tmp_path / "phase2",
    )  # fmt: skip
    cfg = replace(loaded.config, train=replace(loaded.config.train, init_from="gone/run"))
    run = tmp_path / "run"
    save_checkpoint(run / "best.pt", loaded.model, cfg, loaded.tokenizer, train_state={"step": 4})
    rows = [{"kind": "train", "step": 4, "loss": 1.5, "time": 60.0, "tok_per_s": 1.0}]
    (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = ROOT / "scripts" / "reproduce" / "export_checkpoint.py"
    cmd = [sys.executable, str(script), str(run), str(tmp_path / "out")]
    failed = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert failed.returncode != 0 and "gone/run" in failed.stderr
    assert "Traceback" not in failed.stderr and len(failed.stderr.strip().splitlines()) == 1
    done = subprocess.run(cmd + ["--base", str(base)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["steps_trained"] == 4 and printed["init_from"]["path"] == str(base)
