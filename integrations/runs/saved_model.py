"""The one saved-model format of every trainer: a folder with ``model.safetensors`` and ``cl_plugins.json``.

Every trainer saves what it trained the same way, and every entry point reads it with :func:`read`:

* ``model.safetensors``: the weights (tensors only; reading them can never run code);
* ``cl_plugins.json``: ``{"format", "version", "trainer", "model", "run", "records"}``: the trainer that
  wrote it (``graphcl_tu``, ``grace``, ``graphcl_transfer``, ``dcrec``, ``vision``, ``simcse``, ``mabel``),
  the arguments that rebuild the module (``model``), the run's configuration with its strategy
  (``run["loss"]``, ``run["loss_args"]``), and what the run measured (``records``).

A text encoder's folder is also a Hugging Face model folder (its ``model.safetensors`` is the encoder's,
written by ``save_pretrained``) and a sentence-transformers folder (see
:mod:`cl_plugins.integrations.modalities.text.export`).

The folder is written through :func:`cl_plugins.integrations.runs.atomic.folder`: a kill leaves the previous one.
A folder that is not what an entry point expects (another trainer's, a truncated file, not ours at all)
is refused with one line naming the path, what was expected and what was found.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.runs import atomic, bounded_json, guard
from cl_plugins.integrations.runs.layout import MODEL

T = TypeVar("T")
#: the top-level keys of ``cl_plugins.json``, and the type each holds
KEYS: dict[str, type] = {"format": str, "version": int, "trainer": str, "model": dict, "run": dict, "records": dict}

INFO = "cl_plugins.json"
WEIGHTS = "model.safetensors"
FORMAT = "cl-plugins saved model"
VERSION = 1


@dataclass(frozen=True)
class SavedModel:
    """A saved model as read back: where it is, who wrote it, how to rebuild it, and its weights."""

    path: Path
    trainer: str
    model: dict[str, Any]
    run: dict[str, Any]
    records: dict[str, Any] = field(default_factory=dict)
    weights: dict[str, Any] = field(default_factory=dict)


def write(
    folder: Path,
    trainer: str,
    *,
    model: dict[str, Any],
    run: dict[str, Any],
    weights: dict[str, Any] | None,
    records: dict[str, Any] | None = None,
    extra: Callable[[Path], None] | None = None,
) -> None:
    """Write ``folder`` atomically. ``weights`` (a state dict; None when ``extra`` writes them, as Hugging Face's
    ``save_pretrained`` does) go to ``model.safetensors``; ``extra(tmp)`` may add files of its own."""
    info = {"format": FORMAT, "version": VERSION, "trainer": trainer, "model": model, "run": run,
            "records": records or {}}  # fmt: skip
    text = json.dumps(info, indent=2, default=str)
    with atomic.folder(Path(folder)) as tmp:
        if extra is not None:
            extra(tmp)
        if weights is not None:
            write_weights(weights, tmp / WEIGHTS)
        (tmp / INFO).write_text(text, encoding="utf-8")


def write_weights(weights: dict[str, Any], file: Path) -> None:
    """Tensors (a state dict) as a safetensors ``file``, on the CPU; each cloned, since safetensors refuses
    tensors that share memory (tied weights, views)."""
    from safetensors.torch import save_file

    save_file({k: v.detach().cpu().contiguous().clone() for k, v in weights.items()}, str(file))


def _folder_of(path: Path) -> Path:
    """The saved model's folder for a path naming it, one of its two files, or the run folder it is the ``model/``
    of (:class:`~cl_plugins.integrations.runs.layout.RunLayout`)."""
    if path.name in (INFO, WEIGHTS) and path.is_file():
        return path.parent
    return path / MODEL if not (path / INFO).exists() and (path / MODEL / INFO).is_file() else path


def read_info(path: str | Path, trainers: Iterable[str], what: str) -> SavedModel:
    """The folder's ``cl_plugins.json`` (weights not read), checked to come from one of ``trainers``."""
    trainers = tuple(trainers)
    guard.restore_interrupted(Path(path).absolute())  # a run folder an interrupted --overwrite left: back first
    folder = _folder_of(Path(path))
    expected = f"a {what} (a folder written by {' or '.join(trainers)})"
    if not folder.exists():
        raise FileNotFoundError(f"{path}: no such file or folder; expected {expected}")
    if not (folder / INFO).is_file():
        found = "a file" if folder.is_file() else f"a folder without {INFO}"
        raise ValueError(f"{path} is not {expected}: it is {found}")
    info = bounded_json.read(folder / INFO)
    if not isinstance(info, dict) or info.get("format") != FORMAT or "trainer" not in info:
        raise ValueError(f"{folder / INFO} is not a cl-plugins saved-model description")
    if info.get("version") != VERSION:
        raise ValueError(f"{folder} is saved-model version {info.get('version')}; this cl-plugins reads {VERSION}")
    if info["trainer"] not in trainers:
        raise ValueError(f"{path} is not {expected}: it was written by {info['trainer']}")
    _check_keys(info, folder / INFO)
    return SavedModel(folder, info["trainer"], info["model"], info["run"], info.get("records") or {})


def _check_keys(info: dict[str, Any], where: Path) -> None:
    """Every key of :data:`KEYS` but ``records`` present with its type, and no other (an edited or foreign file)."""
    extra = sorted(set(info) - set(KEYS))
    if extra:
        raise ValueError(f"{where} has keys {extra} that no cl-plugins saved model has; it was edited or written by "
                         "something else")  # fmt: skip
    for key, kind in KEYS.items():
        if key not in info and key != "records":
            raise ValueError(f"{where} lacks {key!r}; it was edited or cut short")
        if key in info and not isinstance(info[key], kind):
            json_kind = "an object" if kind is dict else f"a {kind.__name__}"
            raise ValueError(f"{where}: {key!r} must be {json_kind}, got {type(info[key]).__name__}")


def expect_model_keys(saved: SavedModel, keys: Iterable[str]) -> None:
    """The description ``model`` holds exactly ``keys`` (what its trainer writes), or one line naming the file."""
    keys = set(keys)
    if set(saved.model) != keys:
        raise ValueError(f"{saved.path / INFO}: its model is described by {sorted(keys)}, got {sorted(saved.model)}; "
                         "it was edited or written by something else")  # fmt: skip


def run_config(saved: SavedModel, config_cls: type[T], **overrides: Any) -> T:
    """The run's configuration rebuilt from ``cl_plugins.json``'s ``run`` (``overrides`` replacing some settings),
    or one line naming the file and the setting: unknown settings and values of another type than the setting's
    default are refused, and so is whatever the configuration's own checks refuse."""
    where, fields = saved.path / INFO, {f.name: f for f in dataclasses.fields(config_cls) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(saved.run) - set(fields))
    if unknown:
        raise ValueError(f"{where}: its run has settings {unknown} that {config_cls.__name__} does not have; it was "
                         "edited or written by another version")  # fmt: skip
    for name, value in saved.run.items():
        default = fields[name].default
        if default is dataclasses.MISSING or default is None or value is None:
            continue
        kinds = (int, float) if type(default) is float else (type(default),)
        if not isinstance(value, kinds) or (isinstance(value, bool) and type(default) is not bool):
            raise ValueError(f"{where}: run setting {name!r} must be a {type(default).__name__}, got {value!r}")
    try:
        return config_cls(**{**saved.run, **overrides})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: its run settings are not a valid {config_cls.__name__}: "
                         f"{atomic.first_line(exc)}") from None  # fmt: skip


@contextlib.contextmanager
def at_most(tensors: int, where: str | Path, holds: str = WEIGHTS) -> Iterator[None]:
    """Abort a module's construction once it registers more than ``tensors`` parameters and buffers (a description
    asking for a million layers stops at the weights' own count, long before it is built); ``holds`` names the file
    whose tensors were counted."""
    from torch.nn.modules import module as nn_module

    count = [0]

    def hook(*_: Any) -> None:
        count[0] += 1
        if count[0] > tensors:
            raise ValueError(f"{where} describes a model with more tensors than {holds} holds ({tensors})")

    handles = [nn_module.register_module_parameter_registration_hook(hook),
               nn_module.register_module_buffer_registration_hook(hook)]  # fmt: skip
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@strict_flags
def build(saved: SavedModel, factory: Callable[[], Any], what: str, *, strict: bool = True) -> Any:
    """``factory()`` (a module built from ``saved.model`` / the run), first on the ``meta`` device, where nothing
    is allocated and construction stops beyond the weights' tensor count; its names and shapes are compared with
    the weights (``strict``: the same names; otherwise the shapes of the names both have), then it is built for
    real. A description that does not build, or builds other shapes, is refused in one line naming the file,
    before any memory is spent on it."""
    import torch

    where = saved.path / INFO
    try:
        with torch.device("meta"), at_most(2 * len(saved.weights) + 16, where):  # a tensor may be registered twice
            shell = factory()
    except (KeyError, TypeError, IndexError, AttributeError, RuntimeError, ValueError) as exc:
        if str(exc).startswith(str(where)):
            raise
        raise ValueError(f"{where} does not describe a {what} that can be built ({type(exc).__name__}: "
                         f"{atomic.first_line(exc)})") from None  # fmt: skip
    differs = first_difference(shell.state_dict(), saved.weights, strict)
    if differs:
        raise ValueError(f"{where} describes a {what} whose weights differ from {saved.path / WEIGHTS} (first at "
                         f"{differs})")
    return factory()


def first_difference(expected: dict[str, Any], found: dict[str, Any], strict: bool = True) -> str | None:
    """Where two state dicts differ in names (``strict``; otherwise they must share one) or shapes: "name: shape
    expected, shape found"; None when they agree."""
    want = {k: tuple(v.shape) for k, v in expected.items()}
    have = {k: tuple(v.shape) for k, v in found.items()}
    common = set(want) & set(have)
    names = sorted(set(want) ^ set(have)) if strict else ([] if common else sorted(have))  # names first
    names = names or [k for k in sorted(common) if want[k] != have[k]]  # then shapes
    return f"{names[0]}: {want.get(names[0])} described, {have.get(names[0])} saved" if names else None


def read(path: str | Path, trainers: Iterable[str], what: str) -> SavedModel:
    """:func:`read_info` and the weights of ``model.safetensors`` (on the CPU)."""
    saved = read_info(path, trainers, what)
    return SavedModel(**{**saved.__dict__, "weights": read_weights(saved.path / WEIGHTS, what)})


def read_weights(file: Path, what: str) -> dict[str, Any]:
    """A safetensors file's tensors, or one line naming the file and what is wrong with it."""
    from safetensors.torch import load_file

    if not file.is_file():
        raise FileNotFoundError(f"{file}: missing; the {what} has no weights")
    try:
        return load_file(str(file), device="cpu")
    except Exception as exc:  # SafetensorError: truncated header or data, not a safetensors file
        raise ValueError(f"{file} is not a readable safetensors file ({atomic.first_line(exc)}); was it cut short "
                         "while being written or copied?") from None  # fmt: skip


def is_saved_model(path: str | Path) -> bool:
    """Whether ``path`` names a saved-model folder (or one of its two files)."""
    return (_folder_of(Path(path)) / INFO).is_file()


def load_into(module: Any, weights: dict[str, Any], source: Path, what: str) -> None:
    """``module.load_state_dict(weights)``, or one line naming ``source`` when the shapes or names differ."""
    try:
        module.load_state_dict(weights)
    except RuntimeError as exc:
        first = next((line.strip() for line in str(exc).splitlines()[1:] if line.strip()), str(exc))
        raise ValueError(f"{source} does not fit the {what} it describes: {first}") from None
