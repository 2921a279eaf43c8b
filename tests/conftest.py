"""Suite-wide settings.

The tests run tiny models, where a second thread only adds synchronisation overhead (and, on a
shared 2-core machine, fights other processes for the cores): every test runs on one thread.
"""

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
