"""`train.precision: auto`: bf16 autocast where the hardware has bf16 units and the model is wide
enough to gain from it, fp32 elsewhere; the choice and its reason reach the log and the run."""

from __future__ import annotations

import json

import pytest
import torch
from test_train import prepared, tiny  # noqa: F401  (the module's fixture)

import musicgen.device as D
from musicgen.checkpoint import read_payload
from musicgen.train.run import train

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)


@pytest.mark.parametrize(
    ("device", "asked", "units", "width", "want"),
    [
        (CPU, "fp32", "amx_bf16", 512, "fp32"),  # an explicit choice is kept
        (CPU, "fp16", None, 512, "fp16"),
        (CUDA, "auto", None, 32, "bf16"),
        (CPU, "auto", "amx_bf16", 512, "bf16"),
        (CPU, "auto", "avx512_bf16", D.BF16_MIN_WIDTH, "bf16"),
        (CPU, "auto", "amx_bf16", D.BF16_MIN_WIDTH - 1, "fp32"),  # too narrow to gain
        (CPU, "auto", None, 512, "fp32"),  # no bf16 units: bf16 would be emulated, slower
    ],
)
def test_auto_precision_follows_the_hardware_and_width(
    monkeypatch, device, asked, units, width, want
):
    monkeypatch.setattr(D, "cpu_bf16_units", lambda: units)
    precision, why = D.resolve_precision(device, asked, width)
    assert precision == want
    assert why == "as configured" if asked != "auto" else why.startswith("auto: ")
    if asked == "auto" and device.type == "cpu" and units:
        assert units in why


def test_cpu_bf16_units_names_what_torch_reports():
    units = D.cpu_bf16_units()
    if torch.cpu._is_amx_tile_supported():
        assert units == "amx_bf16"
    elif torch.cpu._is_avx512_bf16_supported():
        assert units == "avx512_bf16"
    else:
        assert units is None


@pytest.mark.parametrize(("units", "want"), [("amx_bf16", "bf16"), (None, "fp32")])
def test_the_resolved_precision_reaches_the_log_and_the_checkpoint(
    prepared,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
    units,
    want,
):
    monkeypatch.setattr(D, "cpu_bf16_units", lambda: units)
    monkeypatch.setattr(D, "BF16_MIN_WIDTH", 1)
    run = tmp_path / "run"
    train(tiny(prepared, "train.device=cpu", "train.max_steps=2", "train.val_every=2"), run)
    header = capsys.readouterr().out
    assert f"precision {want} (auto: " in header
    rows = [json.loads(x) for x in (run / "log.jsonl").read_text().splitlines()]
    assert {r["precision"] for r in rows if r["kind"] == "train"} == {want}
    assert read_payload(run / "last.pt")["train_state"]["precision"] == want
