"""A pickle that runs code when it is read: what a crafted checkpoint, cache or data file could hold."""

from __future__ import annotations

from pathlib import Path


class Planted:
    """Unpickling this runs ``builtins.exec``, which writes ``marker``: a test asserts the file never appears."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))
