"""Small file helpers shared by the command line and the job runner."""

from __future__ import annotations

import os
import tempfile


def _umask() -> int:
    """The process's umask, read without changing it where the system allows."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore at once
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write ``text`` (or bytes) to ``path`` under a temporary name in the same folder,
    flush it to disk, then rename it into place: the file is complete or
    absent, never half-written, also after a power loss.  The file gets the
    permissions of any new file (``0o666`` less the umask), not a temporary
    file's ``0o600``."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        fsync_dir(folder)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def fsync_dir(folder: str | os.PathLike) -> None:
    """Flush a folder's entries (a rename into it) to disk, where the platform
    gives folders a handle."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def probe_writable(folder: str | os.PathLike) -> None:
    """Create ``folder`` if needed and a file in it, then remove the file; the
    ``OSError`` of the first step that fails, so a caller can say so before
    any work."""
    os.makedirs(folder, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".kcpstream-check-"):
        pass


def check_writable(path: str | os.PathLike, *, folder: bool = False, label: str = "") -> None:
    """Raise :class:`~kcpstream.InputError` now, before any work, when the file
    (or, with ``folder``, the folder) ``path`` cannot be written: one line
    naming it (``label``, by default "the file PATH") and why."""
    from kcpstream.errors import InputError

    path = os.fspath(path)
    what = label or f"the {'folder' if folder else 'file'} {path}"
    target = os.path.abspath(path if folder else os.path.dirname(os.path.abspath(path)))
    try:
        probe_writable(target)
    except OSError as exc:
        raise InputError(
            f"{what} cannot be written: {exc.strerror or exc}; choose a writable place"
        ) from None
    if not folder and os.path.isdir(path):
        raise InputError(f"{what} cannot be written: it is a folder")
