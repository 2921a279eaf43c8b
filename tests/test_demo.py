"""`musicgen demo` on the shipped checkpoints: they load with the current code and make music."""

from pathlib import Path

import symusic

from musicgen.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_demo_writes_pieces_from_every_shipped_checkpoint(tmp_path, capsys):
    # 4 bars: a piece may open with an empty bar or two, as many POP909 songs do
    code = main(["demo", "--out", str(tmp_path), "--bars", "4", "--max-tokens", "160"])
    out = capsys.readouterr().out
    assert code == 0, out
    midis = sorted(p.name for p in tmp_path.glob("*.mid"))
    assert midis == [
        "groove_sine_spe_gated_trio_test_prompt_1_0.mid",
        "maestro_sine_spe_gated_maestro_test_prompt_1_0.mid",
        "pop909_sine_spe_gated_1_0.mid",
        "pop909_sine_spe_gated_1_1.mid",
        "pop909_sine_spe_gated_pop909_005_1_0.mid",
    ]
    for name in midis:
        assert symusic.Score(str(tmp_path / name)).note_num() > 0
        assert (tmp_path / name).with_suffix(".png").is_file()
    assert f"wrote {len(list(tmp_path.iterdir()))} files" in out


def test_demo_reports_a_missing_checkpoint(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--pop", str(tmp_path / "nope.pt")]) == 1
    assert "nope.pt: the bundled pop checkpoint is missing" in capsys.readouterr().err
