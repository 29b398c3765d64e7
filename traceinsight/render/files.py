"""Writing a command's outputs all or nothing.

Every file is rendered in memory first, then staged beside its target and moved into place only when all of
them were staged: a render error or an output that cannot be written (a read-only folder, a full disk) leaves
the user's files as they were, not a new JSON beside an old HTML report (a user review's
`--json ok.json -o /proc/x.html` had written ok.json and then failed).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_all(files: dict[Path, str | bytes]) -> None:
    staged: list[tuple[str, Path]] = []
    direct: list[tuple[Path, bytes]] = []
    try:
        for path, data in files.items():
            data = data.encode("utf-8") if isinstance(data, str) else data
            # A link is written through, not replaced by a file; a device or a pipe (/dev/stdout, a FIFO) is
            # written in place: a rename would have put a plain file where the device was.
            path = Path(os.path.realpath(path))
            if path.exists() and not path.is_file():
                direct.append((path, data))
                continue
            try:
                fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
            except OSError as exc:     # (named by the output, not by the staging file)
                raise OSError(exc.errno, exc.strerror, str(path)) from None
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            # The mode the file had, else what a new file gets (mkstemp's 0600 would hide it from the user's group).
            os.chmod(tmp, (path.stat().st_mode & 0o7777) if path.exists() else 0o666 & ~_umask())
        for path, data in direct:
            with open(path, "wb") as f:
                f.write(data)
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
