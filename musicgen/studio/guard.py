"""What the studio's server answers beyond Gradio's own routes: an ASGI middleware in front of
Gradio's file and upload routes.

Gradio's file route (`/gradio_api/file=PATH`) answers for its cache, its upload folder and the
static paths. The studio serves only its results: a file directly inside a live page's folder
(`ROOT/sessions/<unguessable token>/`), of the three kinds it writes, as a download (its own
content type, `Content-Disposition: attachment`, no sniffing). Everything else there (uploads,
cached copies, any other path) is 404. An upload is taken only under a MIDI name and while the
studio's folder is inside its disk budget; anything else is deleted at once and refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from starlette.responses import JSONResponse

from musicgen.studio.session import SESSIONS, folder_bytes

SERVED = {".mid": "audio/midi", ".wav": "audio/wav", ".png": "image/png"}
UPLOADS = (".mid", ".midi")
FILE_ROUTES = ("/gradio_api/file=", "/gradio_api/file/", "/gradio_api/proxy=")
UPLOAD_ROUTE = "/gradio_api/upload"


def served_file(root: Path, raw: str) -> Path | None:
    """The result file that `raw` (the path in a file route) names, or None: only a regular file
    of a served kind directly inside an existing page folder under `root`."""
    sessions = os.path.realpath(root / SESSIONS)
    real = os.path.realpath(raw) if os.path.isabs(raw) else ""
    parts = Path(os.path.relpath(real, sessions)).parts if real else ()
    if len(parts) != 2 or ".." in parts or Path(real).suffix not in SERVED:
        return None
    return Path(real) if os.path.isfile(real) and not os.path.islink(raw) else None


class Guard:
    """ASGI middleware: the file route serves results only, the upload route takes MIDI only."""

    def __init__(self, app, root: Path, server_mb: float):
        self.app, self.root, self.server_mb = app, Path(root), server_mb

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if any(route in path for route in FILE_ROUTES):
            target = served_file(self.root, path.split("=", 1)[-1] if "=" in path else "")
            if target is None:
                return await JSONResponse({"detail": "Not Found"}, 404)(scope, receive, send)
            return await self.app(scope, receive, _as_download(send, target))
        if path.rstrip("/") == UPLOAD_ROUTE and scope.get("method") == "POST":
            return await self._upload(scope, receive, send)
        return await self.app(scope, receive, send)

    async def _upload(self, scope, receive, send):
        if folder_bytes(self.root) > self.server_mb * 1e6:
            message = f"studio: the server's disk budget ({self.server_mb:g} MB) is full"
            return await JSONResponse({"detail": message}, 507)(scope, receive, send)
        held: list[dict] = []

        async def hold(message: dict) -> None:
            held.append(message)

        await self.app(scope, receive, hold)
        stored = _stored_paths(held)
        bad = [p for p in stored if Path(p).suffix.lower() not in UPLOADS]
        if bad:
            for p in stored:
                Path(p).unlink(missing_ok=True)
            message = f"{Path(bad[0]).name}: only MIDI files ({', '.join(UPLOADS)}) can be uploaded"
            return await JSONResponse({"detail": message}, 415)(scope, receive, send)
        for message in held:
            await send(message)


def _stored_paths(held: list[dict]) -> list[str]:
    """The paths Gradio's upload route answered with (none for an error answer)."""
    if not held or held[0].get("status") != 200:
        return []
    body = b"".join(m.get("body", b"") for m in held[1:])
    try:
        paths = json.loads(body)
    except ValueError:
        return []
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


def _as_download(send, target: Path):
    """`send` with the result's own content type, as an attachment, never sniffed."""

    async def wrapped(message: dict) -> None:
        if message["type"] == "http.response.start":
            keep = [
                (k, v)
                for k, v in message.get("headers", [])
                if k.lower() not in (b"content-type", b"content-disposition")
            ]
            name = target.name.encode("ascii", "replace")
            keep += [
                (b"content-type", SERVED[target.suffix].encode()),
                (b"content-disposition", b'attachment; filename="' + name + b'"'),
                (b"x-content-type-options", b"nosniff"),
            ]
            message = {**message, "headers": keep}
        await send(message)

    return wrapped
