"""``cl-plugins``: every train / evaluate entry point and the data registry behind one command.

    cl-plugins simcse-main --max_steps 10         # the main job (also: accelerate launch examples/simcse_macl.py)
    cl-plugins graphcl-tu --dataset MUTAG --loss macl
    cl-plugins data list
    cl-plugins COMMAND --help                     # that command's flags

Under several processes: ``accelerate launch -m integrations.console COMMAND ...``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: command -> (module with ``main(argv)``, what it does)
COMMANDS: dict[str, tuple[str, str]] = {
    "simcse-main": ("integrations.simcse.main_job", "the main job: unsupervised SimCSE + MACL, evaluated before/after"),
    "simcse-train": ("integrations.simcse.train", "SimCSE training with any strategy"),
    "simcse-eval": ("integrations.simcse.evaluate", "SentEval STS / transfer evaluation of a sentence encoder"),
    "mabel-train": ("integrations.mabel.train", "MABEL debiasing with any strategy"),
    "mabel-eval": ("integrations.mabel.evaluate", "SEAT, CrowS-Pairs and StereoSet of a MABEL checkpoint"),
    "graphcl-tu": ("integrations.graph.graphcl_tu", "GraphCL unsupervised TU graph classification"),
    "graphcl-transfer": ("integrations.graph.graphcl_transfer", "GraphCL molecule pre-training and MoleculeNet"),
    "grace": ("integrations.graph.grace", "GRACE node classification (Planetoid)"),
    "graph-eval": ("integrations.graph.evaluate", "evaluate a saved graph encoder"),
    "dcrec-train": ("integrations.dcrec.train", "DCRec sequential recommendation with any strategy"),
    "dcrec-eval": ("integrations.dcrec.evaluate", "ranking metrics of a saved DCRec run"),
    "msc": ("integrations.msc.anomaly", "Mean-Shifted Contrastive anomaly detection"),
    "vision-train": ("integrations.vision.train", "SimCLR / MoCo / SimCo vision SSL with kNN and linear probes"),
    "data": ("integrations.common.data_cli", "the dataset registry: list, download, verify"),
}  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    commands = "\n".join(f"  {name:18} {what}" for name, (_, what) in COMMANDS.items())
    parser = argparse.ArgumentParser(prog="cl-plugins", description=__doc__, epilog=f"commands:\n{commands}",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("command", choices=list(COMMANDS), metavar="COMMAND", help="one of the commands below")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the command's own flags (COMMAND --help)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    module, _ = COMMANDS[args.command]
    sys.argv = [f"cl-plugins {args.command}", *args.args]
    importlib.import_module(module).main(args.args)


if __name__ == "__main__":
    main()
