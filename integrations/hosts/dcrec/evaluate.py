"""``cl-plugins dcrec-eval RUN_DIR`` re-evaluates a saved run (``model/`` of
:mod:`cl_plugins.integrations.hosts.dcrec.train`) on its dataset's validation and test rows: full ranking over all
items, and DCRec's ``pop100`` (:mod:`cl_plugins.integrations.hosts.dcrec.ranking`).
"""

from __future__ import annotations

import json
from typing import Any

from cl_plugins.integrations.command_line import one_line_errors
from cl_plugins.integrations.hosts.dcrec.configs import evaluate_parser
from cl_plugins.integrations.hosts.dcrec.ranking import PROTOCOLS, evaluate, format_metrics, history_mask
from cl_plugins.integrations.hosts.dcrec.train import load_run

__all__ = ["PROTOCOLS", "evaluate", "format_metrics", "history_mask", "main"]


@one_line_errors
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = evaluate_parser(__doc__)
    args = parser.parse_args(argv)
    model, splits, config = load_run(args.run_dir)
    out: dict[str, Any] = {"selection": splits.label, "dataset": config["dataset"], "loss": config["loss"]}
    for name in ("valid", "test") if args.split == "both" else (args.split,):
        rows, graphs = (splits.valid, splits.valid_graphs) if name == "valid" else (splits.test, splits.test_graphs)
        out[name] = evaluate(
            model, rows, graphs, splits.popularity, exclude_history=args.exclude_history, seed=args.seed,
            negatives=config.get("negatives", 100),
        )  # fmt: skip
        print(f"[{splits.label}] {name}: {format_metrics(out[name])}")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
