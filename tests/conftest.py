"""Suite-wide settings.

Tests marked `shared` read whole datasets from ../shared/data; without it they skip with one line.
The tests run tiny models, where a second thread only adds synchronisation overhead (and, on a
shared 2-core machine, fights other processes for the cores): every test runs on one thread.
A suite started in the background of a script (`pytest &`, nohup) inherits an ignored SIGINT;
the Ctrl-C tests need Python's own handler, so it is put back (children then get it too).
"""

import shutil
import signal
from pathlib import Path

import pytest
import torch
from paths import SHARED, UNIT_SONGS

SONGS = UNIT_SONGS
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    if SHARED.is_dir():
        return
    skip = pytest.mark.skip(reason=f"needs the full datasets in {SHARED} (not in a fresh clone)")
    for item in items:
        if "shared" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def prepared(tmp_path_factory) -> Path:
    """The bundled POP909 songs prepared as split folders: all in train, one also in validation."""
    inp = tmp_path_factory.mktemp("in")
    for s in SONGS:
        (inp / "train" / s.parent.name).mkdir(parents=True)
        shutil.copy(s, inp / "train" / s.parent.name / s.name)
    (inp / "validation").mkdir()
    # prepare drops byte-identical copies, so the validation copy carries an extra chunk that
    # MIDI readers skip: other bytes, the same music
    extra = b"XTRA" + (4).to_bytes(4, "big") + b"copy"
    (inp / "validation" / SONGS[0].name).write_bytes(SONGS[0].read_bytes() + extra)
    out = tmp_path_factory.mktemp("prepared")
    from musicgen.data.prepare import prepare

    prepare("folder", inp, out, workers=1)
    return out


def tiny_model_config(vocab_size: int, pe: str = "sine_spe"):
    """The untrained 2 x 32 model the generation and robustness tests run (any tokenizer)."""
    from musicgen.config import ModelConfig

    return ModelConfig(
        vocab_size=vocab_size,
        n_layers=2,
        d_model=32,
        n_heads=2,
        d_ff=64,
        dropout=0.0,
        n_features=16,
        num_realizations=8,
        num_sines=2,
        kernel_size=8,
        pe=pe,
    )


def make_checkpoint(folder: Path, name: str, pe: str = "sine_spe") -> Path:
    """A tiny untrained model with the `name` tokenizer, saved as `tiny_<name>.pt`."""
    from musicgen.checkpoint import save_checkpoint
    from musicgen.config import Config
    from musicgen.model import build_model
    from musicgen.tokenizers import build_tokenizer

    tok = build_tokenizer(name)
    model_cfg = tiny_model_config(tok.vocab_size, pe)
    torch.manual_seed(0)
    model = build_model(model_cfg).eval()
    path = folder / f"tiny_{Path(name).stem}.pt"  # a registry name or a YAML file
    save_checkpoint(path, model, Config(name="tiny", tokenizer=name, model=model_cfg), tok)
    return path


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory) -> dict[str, Path]:
    """Tiny untrained REMI and groove checkpoints (`.pt`), made once per run."""
    folder = tmp_path_factory.mktemp("ckpt")
    return {name: make_checkpoint(folder, name) for name in ("remi", "groove")}
