"""Suite-wide settings.

The tests run tiny models, where a second thread only adds synchronisation overhead (and, on a
shared 2-core machine, fights other processes for the cores): every test runs on one thread.
"""

import shutil
from pathlib import Path

import pytest
import torch

SONGS = sorted((Path(__file__).resolve().parent / "data" / "pop909").glob("*/*.mid"))


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
