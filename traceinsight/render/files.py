"""Writing a command's outputs all or nothing, as far as the file system lets us.

Every file is rendered in memory first (a render error writes nothing). New files are then staged beside their
targets and moved into place only after every other output was written: a folder that cannot be written, or a
full disk, leaves no new JSON beside a missing HTML report (a user review's `--json ok.json -o /proc/x.html` had
written ok.json and then failed). A file that already exists (the user gave --force) is written in place, not
replaced: it keeps its owner, mode and hard links, a link keeps pointing at it, and a device or a pipe
(/dev/stdout, a FIFO) gets the bytes (a rename had put a plain file where /dev/full was).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

_UMASK = os.umask(0)     # (read once, at import: setting it later would race other threads)
os.umask(_UMASK)


def write_all(files: dict[Path, str | bytes]) -> None:
    staged: list[tuple[str, Path]] = []
    in_place: list[tuple[Path, bytes]] = []
    try:
        for path, data in files.items():
            path = Path(path)
            data = data.encode("utf-8") if isinstance(data, str) else data
            if path.exists():
                in_place.append((path, data))
                continue
            target = Path(os.path.realpath(path))     # (a dangling link: create what it points at)
            try:
                fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
            except OSError as exc:     # (named by the output, not by the staging file)
                raise OSError(exc.errno, exc.strerror, str(path)) from None
            staged.append((tmp, target))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o666 & ~_UMASK)    # (what a new file gets; mkstemp's 0600 would hide it from the group)
        for path, data in in_place:
            with open(path, "wb") as f:
                f.write(data)
        for tmp, target in staged:
            os.replace(tmp, target)
    except BaseException:
        for tmp, _ in staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
