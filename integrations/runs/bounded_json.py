"""JSON a run reads back (descriptions, manifests, states), with bounds: a file anyone could edit is refused in one
line when it nests deeper than :data:`MAX_DEPTH` or holds an integer of more than :data:`MAX_DIGITS` digits, instead
of a ``RecursionError`` or Python's 4,300-digit ``ValueError`` (a traceback naming no file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_DEPTH = 64
MAX_DIGITS = 24


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_DIGITS})")
    return int(text)


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
            stack += [(v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)]
    return deepest


def loads(text: str, where: str | Path) -> Any:
    """``json.loads(text)``, or a ``ValueError`` naming ``where`` and what is wrong."""
    try:
        value = json.loads(text, parse_int=_integer)
    except RecursionError:
        raise ValueError(f"{where} nests deeper than {MAX_DEPTH} levels: not a file this program wrote") from None
    except ValueError as exc:
        raise ValueError(f"{where} is not readable JSON ({str(exc).splitlines()[0][:200]}); was it cut short or "
                         "edited?") from None  # fmt: skip
    if _depth(value) > MAX_DEPTH:
        raise ValueError(f"{where} nests deeper than {MAX_DEPTH} levels: not a file this program wrote")
    return value


def read(path: Path) -> Any:
    """The JSON file ``path`` (UTF-8), bounded as :func:`loads`."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text (byte {exc.start}); was it cut short or edited?") from None
    return loads(text, path)
