"""Small file helpers: every file musicgen writes goes through an atomic, verified rename.

A write first fills a temporary file next to the target, then checks that what reached the disk is
complete (its size, and for MIDI a read-back), and only then renames it over the target. A full or
read-only disk therefore never replaces a good file with a broken one, and every failure is one
`MusicgenError` line naming the file ("cannot write (No space left on device)").

Special targets: a symbolic link is written through (its target file is replaced, atomically as
above; the link stays a link), and a target that is not a regular file (a device node, a FIFO, a
socket) is refused: renaming over it would silently turn /dev/null or a pipe into a plain file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from musicgen.errors import MusicgenError

_UMASK = os.umask(0)
os.umask(_UMASK)

TMP_SUFFIX = ".tmp"  # temporaries are `.<name>.<random>.tmp` next to their target


def write_error(path: str | Path, exc: OSError) -> MusicgenError:
    """One line for an OSError met while writing `path` (full disk, read-only, permissions)."""
    reason = exc.strerror or errno.errorcode.get(exc.errno or 0) or type(exc).__name__
    return MusicgenError(f"{path}: cannot write ({reason})")


def ensure_dir(folder: str | Path) -> Path:
    """Create `folder` (and its parents); a file in the way is a one-line error."""
    folder = Path(folder)
    for above in (folder, *folder.parents):  # the nearest existing one must be a folder
        if above.exists():
            if not above.is_dir():
                raise MusicgenError(f"{above}: is a file, not a folder")
            break
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise MusicgenError(f"{folder}: cannot create the folder (a file is in the way)") from None
    except OSError as exc:
        raise write_error(folder, exc) from None
    return folder


@contextlib.contextmanager
def atomic_path(
    path: str | Path, min_bytes: int = 0, verify: Callable[[Path], None] | None = None
) -> Iterator[Path]:
    """Yield a temporary path next to `path`; rename it over `path` only if the block succeeds
    and the result is verified: at least `min_bytes` long and accepted by `verify(tmp)`.

    A crash or a full disk leaves the previous file intact and at most a stray `*.tmp`.
    """
    path = Path(path)
    if path.is_dir():
        raise MusicgenError(f"{path}: is a folder; give a file name")
    path = write_target(path)
    ensure_dir(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    except OSError as exc:
        raise write_error(path, exc) from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        try:
            yield tmp_path
            size = tmp_path.stat().st_size
            if size < min_bytes:
                raise MusicgenError(
                    f"{path}: cannot write (only {size} of {min_bytes} bytes reached the disk; "
                    "is it full?)"
                )
            if verify is not None:
                verify(tmp_path)
            with open(tmp_path, "rb+") as fh:
                os.fsync(fh.fileno())
            os.chmod(tmp_path, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the usual permissions
            os.replace(tmp_path, path)
        except OSError as exc:
            raise write_error(path, exc) from None
    finally:
        with contextlib.suppress(OSError):
            tmp_path.unlink(missing_ok=True)


_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
}


class Unreadable(Exception):
    """Why a file was not read (`prepare`: its skip reason; elsewhere a one-line error)."""


def read_regular(path: str | Path, max_bytes: int, what: str = "a MIDI file") -> bytes:
    """The bytes of the regular file `path` (links followed), or `Unreadable` with the reason:
    a folder, a special file (FIFO, device, socket), a link loop, over `max_bytes`, or an
    OSError. Opened non-blocking and type-checked on the descriptor (a FIFO would block `open`,
    a link to /dev/zero would read without end); at most `max_bytes + 1` bytes are read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise Unreadable(f"is a directory, not {what}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unreadable("is a symbolic link loop (links that never reach a file)") from None
        raise Unreadable(f"cannot read file ({exc.strerror or type(exc).__name__})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise Unreadable(f"is a directory, not {what}")
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise Unreadable(f"{kind}, not a regular file: only regular files are read")
        if st.st_size > max_bytes:
            raise Unreadable(_too_big(st.st_size, max_bytes))
        chunks, total = [], 0
        while total <= max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise Unreadable(f"cannot read file ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)
    if total > max_bytes:  # the file grew while it was read
        raise Unreadable(_too_big(total, max_bytes))
    return b"".join(chunks)


def _too_big(size: int, max_bytes: int) -> str:
    return f"over the size limit ({size / 2**20:.1f} MB > {max_bytes / 2**20:g} MB)"


def write_target(path: Path) -> Path:
    """The file a write to `path` replaces: a symbolic link's target (links followed, so the
    link survives the rename), `path` itself otherwise; a non-regular file is refused."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):  # new, or a file in the way (ensure_dir)
        return target
    except OSError as exc:
        raise write_error(path, exc) from None
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise MusicgenError(f"{path}: is {kind}, not a regular file; refusing to replace it")
    return target


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_path(path, min_bytes=len(data)) as tmp:
        tmp.write_bytes(data)


def write_score(score, path: str | Path) -> Path:
    """Write a `symusic.Score` as a MIDI file, verified by reading the bytes back.

    symusic's file writer does not raise when the disk is full (it leaves a short or empty file),
    so the MIDI bytes are made in memory and written by Python, which does raise; the temporary
    must then hold exactly those bytes before it may replace anything.
    """
    if score.start() < 0:  # a negative time is written as a huge tick: a file read as corrupt
        raise ValueError(f"{path}: an event at tick {score.start()}, before the start")
    data = bytes(in_time_order(score).dumps_midi())

    def readback(tmp: Path) -> None:
        if tmp.read_bytes() != data:
            raise MusicgenError(
                f"{path}: cannot write (the file on disk differs from the MIDI "
                "data; is the disk full?)"
            )

    with atomic_path(path, min_bytes=len(data), verify=readback) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def in_time_order(score):
    """`score`, or a sorted copy where some list of events is out of time order: symusic
    writes events in list order, so an earlier event after a later one becomes a negative
    delta, stored as a huge tick (tempos decoded from ids the grammar did not mask)."""
    lists = [score.tempos, score.time_signatures, score.key_signatures, score.markers]
    for t in score.tracks:
        lists += [t.notes, t.controls, t.pitch_bends, t.pedals, t.lyrics]
    if all(events.is_sorted(key=lambda e: e.time) for events in lists):
        return score
    out = score.copy()
    out.sort()
    return out


def remove_stale_temps(folder: str | Path, names: tuple[str, ...]) -> list[Path]:
    """Delete temporaries that killed writers left behind (`.<name>.*.tmp` for each name)."""
    removed = []
    for name in names:
        for tmp in Path(folder).glob(f".{name}.*{TMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed.append(tmp)
    return removed


class FolderLock:
    """An exclusive `fcntl.flock` on FOLDER/.lock while a command writes FOLDER: a second
    `musicgen <command>` on it fails at once with one line naming the folder (and the holder's
    pid) instead of mixing its files with the first's. The kernel drops the lock however the
    holder ends, so no stale lock is left to clean up. A no-op where fcntl is missing."""

    NAME = ".lock"

    def __init__(self, folder: str | Path, command: str) -> None:
        self.path = Path(folder) / self.NAME
        self.command = command
        self.fd: int | None = None

    def acquire(self) -> FolderLock:
        try:
            import fcntl
        except ImportError:  # Windows
            return self
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise write_error(self.path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            pid = f" (pid {holder})" if holder.isdigit() else ""
            raise MusicgenError(
                f"{self.path.parent}: another musicgen {self.command}{pid} is writing this "
                "folder; wait for it to finish or write to another folder"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
