"""Command-line helpers shared by every adapter: dataclass configs as argparse flags, ``--loss_arg``."""

from __future__ import annotations

import argparse
import ast
import functools
import gc
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import MISSING, field, fields
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class ReportedError(Exception):
    """An error whose message is written for the user (a download the network did not deliver, which says how to
    resume): one line, like the errors of :data:`USER_ERRORS`."""


#: the errors a user's input causes (arguments, data files, checkpoints, output folders), and the errors that
#: report themselves: one line, no traceback
USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError, EOFError,
               FloatingPointError, ReportedError)  # fmt: skip


def host_head_field() -> Any:
    """The ``--host_head`` flag of every trainer whose host has a projection head."""
    help_ = "keep the host's projection head for a strategy that brings its own (AMCL's heads replace it by default)"
    return field(default=False, metadata={"help": help_})


def new_parser(description: str | None) -> argparse.ArgumentParser:
    """A command line's parser: the module docstring as ``--help``'s text, and ``--debug``."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show an error's full traceback, not its one line")
    return parser


def leave_process_group(opened_for_us: bool = False) -> None:
    """End a launched job's process group cleanly: every rank at a barrier, then destroyed.

    Left to the interpreter's exit, gloo's threads sometimes hang after the work is done (the MABEL two-process
    test printed its summary and never exited, 1 run in 5 under load) or abort the process ("terminate called
    without an active exception": a two-process Lightning run, 1 in 15 under load). By default only for processes
    torchrun started (``LOCAL_RANK``): a caller that set up the group itself also ends it. ``opened_for_us``: the
    group was opened on the caller's behalf by a framework that leaves it open (a Lightning ``Trainer``, whose
    rank 0 has no ``LOCAL_RANK``); the objects holding it (DDP's reducer) must already be freed.
    """
    import torch.distributed as dist

    if (opened_for_us or "LOCAL_RANK" in os.environ) and dist.is_available() and dist.is_initialized():
        gc.collect()  # DDP reducers and gloo work objects go before the group does
        dist.barrier()
        dist.destroy_process_group()


def one_line_errors(main: F) -> F:
    """A command line's ``main(argv)``: a user error prints ``error: ...`` on one line and exits with 2
    (``--debug`` raises it with its traceback)."""

    @functools.wraps(main)
    def wrapper(argv: list[str] | None = None, *args: Any, **kwargs: Any) -> Any:
        try:
            out = main(argv, *args, **kwargs)
            leave_process_group()
            return out
        except (*USER_ERRORS, TypeError) as exc:
            given = sys.argv[1:] if argv is None else argv
            why = str(exc) if isinstance(exc, USER_ERRORS) else _loss_arg_collision(exc, given)
            if "--debug" in given or why is None:
                raise
            print(f"error: {why} (--debug shows the traceback)", file=sys.stderr)
            raise SystemExit(2) from None

    return wrapper  # type: ignore[return-value]


def _loss_arg_collision(exc: TypeError, argv: list[str]) -> str | None:
    """The line for a ``--loss_arg KEY=...`` that the command also sets itself (Python's "got multiple values for
    keyword argument 'KEY'"), or None for any other TypeError (a bug: its traceback is shown)."""
    found = re.search(r"got multiple values for keyword argument '(\w+)'", str(exc))
    if found is None or not any(a.removeprefix("--loss_arg=").startswith(f"{found.group(1)}=") for a in argv):
        return None
    key = found.group(1)
    return (f"--loss_arg {key}=...: this command sets {key} itself (its pairs' layout, its own options: see --help), "
            f"so a strategy argument cannot; drop --loss_arg {key}")


#: the command line's words for a boolean strategy argument, case-insensitive (and 1 / 0 where the strategy's
#: argument is boolean: :func:`flags_of`)
FLAG_WORDS = {"true": True, "yes": True, "false": False, "no": False}


def flags_of(loss: str, loss_args: dict[str, Any]) -> dict[str, Any]:
    """``loss_args`` with 1 / 0 as True / False for the boolean arguments of the strategy ``loss`` (an unknown name
    is left to the registry's own error)."""
    from cl_plugins.registry import flag_arguments, get_loss_class

    try:
        flags = set(flag_arguments(get_loss_class(loss)))
    except (TypeError, ValueError):
        return loss_args
    return {k: (bool(v) if k in flags and type(v) is int and v in (0, 1) else v) for k, v in loss_args.items()}


def parse_loss_args(items: list[str], loss: str | None = None) -> dict[str, Any]:
    """``["tau0=0.05", "profile='shifted'", "reweight=false"]`` -> ``{"tau0": 0.05, "profile": "shifted",
    "reweight": False}``: Python literals, ``true/false/yes/no`` in any case as booleans (and 1 / 0 for the
    boolean arguments of the strategy ``loss``, where given), anything else as a string."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--loss_arg takes key=value, got {item!r}")
        key, value = item.split("=", 1)
        if not key.strip().isidentifier():
            raise ValueError(f"--loss_arg {item!r}: {key!r} is not a parameter name; write KEY=VALUE, e.g. tau=0.1")
        key = key.strip()
        word = value.strip().lower()
        if word in FLAG_WORDS:
            out[key] = FLAG_WORDS[word]
            continue
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out if loss is None else flags_of(loss, out)


def add_dataclass_arguments(
    parser: argparse.ArgumentParser, config_cls: type, defaults: dict[str, Any] | None = None
) -> argparse.ArgumentParser:
    """One ``--flag`` per field of ``config_cls`` (help from ``field(metadata={"help": ...})``).

    A field named ``loss_args`` becomes the repeatable ``--loss_arg KEY=VALUE``; list fields take
    several values.
    """
    for f in fields(config_cls):
        if f.name == "loss_args":
            parser.add_argument(
                "--loss_arg",
                action="append",
                default=[],
                metavar="KEY=VALUE",
                help="a strategy parameter, e.g. --loss_arg tau0=0.05 (repeatable)",
            )
            continue
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = MISSING
        default = (defaults or {}).get(f.name, default)
        required = default is MISSING
        kwargs: dict[str, Any] = dict(help=f.metadata.get("help", ""))
        if "choices" in f.metadata:
            kwargs["choices"] = f.metadata["choices"]
        type_name = str(f.type)
        if type_name in ("bool", "<class 'bool'>"):
            kwargs.update(action=argparse.BooleanOptionalAction, default=default)
        elif type_name.startswith("list"):
            inner = {"list[int]": int, "list[float]": float}.get(type_name, str)
            kwargs.update(type=inner, nargs="+", required=required, default=None if required else default)
        else:
            cast = {"int": int, "float": float, "str": str}.get(type_name, str)
            kwargs.update(type=cast, required=required, default=None if required else default)
        parser.add_argument(f"--{f.name}", **kwargs)
    return parser


def config_from_args(config_cls: type[T], args: argparse.Namespace) -> T:
    """The dataclass instance of parsed flags (``--loss_arg`` items parsed into ``loss_args``)."""
    names = [f.name for f in fields(config_cls)]
    values = {name: getattr(args, name) for name in names if name != "loss_args"}
    if "loss_args" in names:
        values["loss_args"] = parse_loss_args(getattr(args, "loss_arg", []), values.get("loss"))
    for name, value in values.items():
        if name.endswith("seeds") and isinstance(value, list) and len(set(value)) < len(value):
            repeated = sorted({s for s in value if value.count(s) > 1})
            raise ValueError(f"--{name} {' '.join(map(str, value))}: seed {repeated[0]} is given twice; each seed is "
                             "one run of the reported mean, so give each once")  # fmt: skip
    return config_cls(**values)


def dataclass_parser(config_cls: type, description: str | None,
                     defaults: dict[str, Any] | None = None) -> argparse.ArgumentParser:  # fmt: skip
    """A command line of one flag per field of ``config_cls`` (``defaults`` override the fields'), described by
    ``description``: what :func:`parse_config` parses and what a command's light ``--help`` shows."""
    return add_dataclass_arguments(new_parser(description), config_cls, defaults)


def module_tree(module: str) -> ast.Module:
    """A module's source, parsed, without importing it or what it imports."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"no module {module!r}")
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


def module_doc(module: str) -> str | None:
    """A module's docstring (as its ``__doc__``), read from its file without importing it or what it imports."""
    return ast.get_docstring(module_tree(module), clean=False)


def command_line(line: str, module: str) -> argparse.ArgumentParser:
    """The parser of a command whose ``line`` is ``"module:Class"`` (a run configuration: one flag per field, as
    :func:`parse_config` builds it) or ``"module:function"`` (called with the description), described by the
    docstring of the command's ``module``, which is not imported."""
    where, _, name = line.partition(":")
    built = getattr(importlib.import_module(where), name)
    description = module_doc(module)
    return dataclass_parser(built, description) if isinstance(built, type) else built(description)


def parse_config(
    config_cls: type[T], description: str | None, argv: list[str] | None = None, defaults: dict[str, Any] | None = None
) -> T:
    """Parse ``argv`` into ``config_cls``: one flag per field, the module docstring as ``--help``'s text."""
    return config_from_args(config_cls, dataclass_parser(config_cls, description, defaults).parse_args(argv))
