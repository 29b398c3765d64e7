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
    try:
        for path, data in files.items():
            path = Path(path)
            try:
                fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
            except OSError as exc:     # (named by the output, not by the staging file)
                raise OSError(exc.errno, exc.strerror, str(path)) from None
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.chmod(tmp, 0o666 & ~_umask())   # (mkstemp's 0600 would hide the report from the user's group)
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
