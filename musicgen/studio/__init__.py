"""`musicgen studio`: a local web app (Gradio) to generate, continue, listen and download.

`inputs.py` checks what a page sends (values, uploads) and `jobs.py` does the work (the
generation API with its progress and cancel hooks) on `models.py` (which models the page may
reach), `session.py` (per-page folders, pieces and stop flags), `keep.py` (a browser's
pieces kept across reloads) and `pieces.py` (how a result is
written), all testable without a browser; `app.py` lays out the page and wires it to them.
Gradio is an optional extra (`pip install "musicgen[studio]"`): nothing here imports it at
package import.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import shutil
import sys
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
    auth: list[tuple[str, str]] | None = None,
):
    """Start the studio for the shipped models and `checkpoints` (model folders); returns the
    running page (`page.local_url`; `page.block_thread()` waits, `page.close()` stops;
    `page.studio_root` is its folder). Every file it writes or receives lies in that one
    temporary folder, deleted at exit. `auth`: (user, password) pairs a login asks for."""
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
    if not is_loopback(host):
        print(
            f"warning: --host {host}: the studio is reachable from other machines; anyone who "
            "reaches it can run jobs on this one"
            + (
                ""
                if auth
                else " (give --auth USER:PASSWORD or --auth-file FILE to ask for a login)"
            ),
            file=sys.stderr,
            flush=True,
        )
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
    page = app.launch(models, root, host, port, concurrency, default, limit, auth)
    page.studio_root = root
    return page


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine only (127.0.0.1, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_auth(spec: str | None = None, path: str | None = None) -> list[tuple[str, str]]:
    """The logins of `--auth USER:PASSWORD` and of `--auth-file FILE` (one USER:PASSWORD a
    line; blank lines and # comments skipped)."""
    lines = [("--auth", spec)] if spec is not None else []
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise MusicgenError(f"--auth-file: cannot read {path} ({exc})") from None
        lines += [(f"{path}:{n}", x.strip()) for n, x in enumerate(text.splitlines(), 1)]
        lines = [(w, x) for w, x in lines if x and not x.startswith("#")]
        if not lines:
            raise MusicgenError(f"--auth-file: {path} holds no USER:PASSWORD line")
    out = []
    for where, line in lines:
        user, sep, password = line.partition(":")
        if not sep or not user or not password:
            raise MusicgenError(f"{where}: give USER:PASSWORD (both not empty)")
        out.append((user, password))
    return out
