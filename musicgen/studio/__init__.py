"""`musicgen studio`: a local web app (Gradio) to generate, continue, listen and download.

`inputs.py` checks what a page sends (values, uploads) and `jobs.py` does the work (which models
the page may reach, per-page sessions and results, the generation API with its progress and
cancel hooks), both testable without a browser; `app.py` lays out the page and wires it to
them. Gradio is an optional extra (`pip install "musicgen[studio]"`): nothing here imports it at
package import.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from musicgen.errors import MusicgenError, check_range


def serve(
    checkpoints: list[str] = (),
    host: str = "127.0.0.1",
    port: int = 7860,
    concurrency: int | None = None,
    device: str = "auto",
    max_upload_mb: float | None = None,
):
    """Start the studio for the shipped models and `checkpoints` (model folders); returns the
    running page (`page.local_url`; `page.block_thread()` waits, `page.close()` stops).
    Every file it writes or receives lies in one temporary folder, deleted at exit."""
    check_range("port", port, 1, 65535)
    check_range("concurrency", concurrency, 1, 64)
    check_range("max_upload_mb", max_upload_mb, 0, 1000, low_open=True)
    try:
        import gradio  # noqa: F401
    except ImportError:
        raise MusicgenError(
            'studio: needs gradio; install it with: pip install "musicgen[studio]"'
        ) from None
    from musicgen.device import pick_device
    from musicgen.studio import inputs, jobs

    choices = jobs.model_choices(list(checkpoints))
    dev = pick_device(device)
    if concurrency is None:  # one job at a time keeps a CPU's cores for it
        concurrency = 1 if dev.type == "cpu" else 2
    root = Path(tempfile.mkdtemp(prefix="musicgen-studio-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    # gradio keeps uploads and served copies in GRADIO_TEMP_DIR, read when gradio is imported
    os.environ["GRADIO_TEMP_DIR"] = str(root / "gradio")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from musicgen.studio import app

    models = jobs.ModelCache(choices, str(dev))
    default = next(iter(choices)) if checkpoints else jobs.DEFAULT_MODEL
    models.get(default if default in choices else next(iter(choices)))  # fail early, warm up
    limit = inputs.MAX_UPLOAD_MB if max_upload_mb is None else max_upload_mb
    return app.launch(models, root, host, port, concurrency, default, limit)
