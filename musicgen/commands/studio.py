"""`musicgen studio`: the local web app (musicgen/studio/); parses, starts, prints the URL."""

from __future__ import annotations

import argparse
import shutil
import signal
import time

from musicgen.errors import Terminated


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "studio",
        help="a local web app: generate, continue, listen and download",
        description='Start the studio (needs the extra: pip install "musicgen[studio]"). The '
        "page serves the shipped models and the --checkpoint models, nothing else on this machine. "
        "It listens on 127.0.0.1 only unless --host says otherwise.",
    )
    p.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="FOLDER",
        help="a model folder (or .pt, run folder, shipped name) to offer first; repeatable",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (0.0.0.0: all; other than 127.0.0.1 prints a warning)",
    )
    p.add_argument(
        "--auth", default=None, metavar="USER:PASSWORD", help="ask for this login on the page"
    )
    p.add_argument(
        "--auth-file", default=None, metavar="FILE", help="logins, one USER:PASSWORD a line"
    )
    p.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="generations run at once; more wait in the queue (default: 1 on a CPU, 2 on a GPU)",
    )
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    p.add_argument(
        "--max-upload-mb", type=float, default=None, help="largest prompt upload (default 2)"
    )
    # the library's messages name serve()'s parameters; cli.flag_message shows these flags
    flags = {"port": "--port", "concurrency": "--concurrency", "max_upload_mb": "--max-upload-mb"}
    p.set_defaults(func=run, flags=flags)


def run(args: argparse.Namespace) -> int:
    from musicgen.studio import parse_auth, serve

    auth = parse_auth(args.auth, args.auth_file) if (args.auth or args.auth_file) else None
    page = serve(
        args.checkpoint, args.host, args.port, args.concurrency, args.device, args.max_upload_mb,
        auth,
    )  # fmt: skip
    print(f"musicgen studio: {page.local_url}", flush=True)
    wait(page)
    return 0


def _terminate(signum, frame) -> None:
    raise Terminated(signum)


def wait(page) -> None:
    """Serve until Ctrl-C or SIGTERM, then stop the server and delete every file it wrote,
    and the folders of Gradio's it made (`temp_made`; the CLI reports the signal)."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        while page.is_running:
            time.sleep(0.2)
    finally:
        signal.signal(signal.SIGTERM, previous)
        try:
            page.close()
        finally:
            shutil.rmtree(page.studio_root, ignore_errors=True)
            for folder in getattr(page, "temp_made", []):
                shutil.rmtree(folder, ignore_errors=True)
