"""``cl-plugins``: every train / evaluate entry point and the data registry behind one command.

    cl-plugins simcse-main --max_steps 10         # the main job (also: accelerate launch examples/simcse_macl.py)
    cl-plugins graphcl-tu --dataset MUTAG --loss macl
    cl-plugins data list
    cl-plugins COMMAND --help                     # that command's flags

Under several processes: ``accelerate launch -m cl_plugins.integrations.console COMMAND ...``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from cl_plugins.integrations.command_line import command_line
from cl_plugins.integrations.hosts import Command
from cl_plugins.integrations.hosts import commands as host_commands

#: the data registry's own command; every other command is a host's (its ``host.py``,
#: :mod:`cl_plugins.integrations.hosts`)
DATA = Command("data", "cl_plugins.integrations.data.cli", "the dataset registry: list, download, verify")


def commands() -> dict[str, Command]:
    """Every subcommand, the hosts' in the order of their packages, then ``data``."""
    return {**host_commands(), DATA.name: DATA}


def build_parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {c.name:18} {c.what}" for c in commands().values())
    parser = argparse.ArgumentParser(prog="cl-plugins", description=__doc__, epilog=f"commands:\n{listing}",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("command", choices=list(commands()), metavar="COMMAND", help="one of the commands below")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the command's own flags (COMMAND --help)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    command = commands()[args.command]
    sys.argv = [f"cl-plugins {args.command}", *args.args]
    if command.line and {"-h", "--help"} & set(args.args):  # the help, without the trainer's heavy imports
        command_line(command.line, command.module).parse_args(args.args)
    importlib.import_module(command.module).main(args.args)


if __name__ == "__main__":
    main()
