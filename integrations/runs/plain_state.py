"""State dictionaries as a JSON file and a safetensors file: written and read without pickle.

An optimizer's, a scheduler's or a trainer's ``state_dict`` is a tree of dicts, lists, tuples, numbers, strings
and tensors. :func:`write` stores the tree in ``<stem>.json`` (each tensor replaced by a reference) and the
tensors in ``<stem>.safetensors``; both carry the same ``identity`` (string pairs saying whose state it is).
:func:`read` rebuilds the tree exactly (int dict keys and tuples included) and refuses, in one line naming the file,
anything it did not write: another structure, a missing tensor, a file that is not JSON or safetensors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from cl_plugins.integrations.runs import bounded_json
from cl_plugins.integrations.runs.atomic import first_line

_TENSOR, _TUPLE, _DICT = "@tensor", "@tuple", "@dict"
_SCALARS = (bool, int, float, str, type(None))


class StateFileError(ValueError):
    """A state file that is not what :func:`write` wrote (the message names the file)."""


def encode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """``obj`` as JSON values, each tensor moved into ``tensors`` and replaced by ``{"@tensor": key}``."""
    if isinstance(obj, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = obj.detach().to("cpu", copy=True).contiguous()
        return {_TENSOR: key}
    if isinstance(obj, _SCALARS):
        return obj
    if isinstance(obj, tuple):
        return {_TUPLE: [encode(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [encode(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("@") for k in obj):
            return {k: encode(v, tensors) for k, v in obj.items()}
        return {_DICT: [[encode(k, tensors), encode(v, tensors)] for k, v in obj.items()]}
    if hasattr(obj, "item") and getattr(obj, "shape", None) == ():  # a NumPy scalar
        return obj.item()
    raise TypeError(f"a {type(obj).__name__} cannot be saved without pickle; state dicts hold tensors, numbers, "
                    "strings, lists, tuples and dicts")  # fmt: skip


def decode(value: Any, tensors: dict[str, torch.Tensor], used: set[str]) -> Any:
    """The inverse of :func:`encode` (raises ``ValueError`` on any structure it does not write)."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, list):
        return [decode(v, tensors, used) for v in value]
    if not isinstance(value, dict):
        raise ValueError(f"unexpected {type(value).__name__}")
    tagged = [k for k in value if k.startswith("@")]
    if not tagged:
        return {k: decode(v, tensors, used) for k, v in value.items()}
    if len(value) != 1:
        raise ValueError(f"a tagged value with other keys ({', '.join(sorted(value)[:3])})")
    tag, inner = tagged[0], value[tagged[0]]
    if tag == _TENSOR and isinstance(inner, str) and inner in tensors:
        used.add(inner)
        return tensors[inner]
    if tag == _TUPLE and isinstance(inner, list):
        return tuple(decode(v, tensors, used) for v in inner)
    if tag == _DICT and isinstance(inner, list) and all(isinstance(p, list) and len(p) == 2 for p in inner):
        return {_key(decode(k, tensors, used)): decode(v, tensors, used) for k, v in inner}
    raise ValueError(f"an unknown or broken {tag!r} entry")


def _key(key: Any) -> Any:
    if isinstance(key, (list, dict)):
        raise ValueError("a dict key that is a list or dict")
    return key


def paths(stem: Path) -> tuple[Path, Path]:
    """The JSON and safetensors files of ``stem``."""
    return stem.with_name(stem.name + ".json"), stem.with_name(stem.name + ".safetensors")


def write(stem: Path, state: Any, identity: dict[str, str]) -> None:
    """``state`` into ``<stem>.json`` and ``<stem>.safetensors`` (written in place: the caller stages the folder)."""
    from safetensors.torch import save_file

    plain, tensor_file = paths(stem)
    tensors: dict[str, torch.Tensor] = {}
    encoded = encode(state, tensors)
    plain.write_text(json.dumps({"identity": identity, "state": encoded}), encoding="utf-8")
    save_file(tensors, str(tensor_file), metadata=identity)


def identity_of(path: Path) -> dict[str, str]:
    """The identity a ``.json`` or ``.safetensors`` file :func:`write` wrote carries (reading no tensor)."""
    return tensor_identity(path) if path.suffix == ".safetensors" else _document(path)["identity"]


def tensor_identity(path: Path) -> dict[str, str]:
    """A safetensors file's metadata (its header only), or a one-line error naming the file."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return dict(f.metadata() or {})
    except Exception as exc:  # not safetensors: SafetensorError, OSError
        raise StateFileError(f"{path} is not a safetensors file ({type(exc).__name__}: {first_line(exc)})") from None


def read(stem: Path) -> Any:
    """The state :func:`write` stored under ``stem``, tensors on the CPU."""
    from safetensors.torch import load_file

    plain, tensor_file = paths(stem)
    document = _document(plain)
    try:
        tensors = load_file(str(tensor_file))
    except Exception as exc:
        raise StateFileError(f"{tensor_file} is not a safetensors file ({type(exc).__name__}: "
                             f"{first_line(exc)})") from None  # fmt: skip
    used: set[str] = set()
    try:
        state = decode(document["state"], tensors, used)
    except (ValueError, RecursionError) as exc:
        raise StateFileError(f"{plain} is not a state this program wrote ({first_line(exc)})") from None
    if used != set(tensors):
        raise StateFileError(f"{tensor_file} holds tensors {plain} does not refer to; the two are not one state")
    return state


def _document(path: Path) -> dict[str, Any]:
    try:
        document = bounded_json.read(path)
    except OSError as exc:
        raise StateFileError(f"{path} is not readable JSON ({type(exc).__name__}: {first_line(exc)})") from None
    except ValueError as exc:
        raise StateFileError(str(exc)) from None
    identity = document.get("identity") if isinstance(document, dict) else None
    if not isinstance(identity, dict) or "state" not in document or \
            not all(isinstance(k, str) and isinstance(v, str) for k, v in identity.items()):  # fmt: skip
        raise StateFileError(f"{path} is not a state file (it needs an identity and a state)")
    return document
