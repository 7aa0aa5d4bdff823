"""Record the size and sha256 of every file of the data pack that a registry entry covers.

    python scripts/data_checksums.py /path/to/shared/data      # rewrites integrations/data/data_files.json

Run it when the pack changes; ``tests/integrations/data/test_catalogue.py`` checks the recorded values against the pack.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

#: which pack files belong to which registry entry (globs relative to the pack root)
PACK_GLOBS: dict[str, tuple[str, ...]] = {
    "senteval": ("sentence/SentEval/data/downstream/**/*",),
    "wiki1m-head": ("sentence/simcse/wiki1m_for_simcse.head.txt",),
    "crows-pairs": ("bias/crows_pairs/*",),
    "stereoset-derived": ("bias/stereoset_derived/*",),
    "bias-bench": ("bias/bias-bench/**/*",),
    "planetoid-cora": ("graphs/planetoid/Cora/raw/*",),
    "planetoid-citeseer": ("graphs/planetoid/CiteSeer/raw/*",),
    **{f"tu-{n.lower()}": (f"graphs/tu/{n}/raw/*",) for n in ("MUTAG", "PROTEINS", "NCI1", "IMDB-BINARY")},
    **{f"moleculenet-{n}": (f"molecules/dataset/{n}/raw/*",) for n in ("bace", "bbbp", "clintox", "sider", "tox21")},
    "zinc-jtnn": ("molecules/zinc/*",),
    "movielens-100k": ("recsys/movielens/ml-100k/*",),
    "dcrec-beauty": ("recsys/dcrec/dataset/beauty/*",),
    "cifar10-jpg": ("images/cifar10-jpg/*",),
}
#: pack files no loader reads (SentEval's SNLI lacks its training split, so the task cannot run)
EXCLUDE = ("sentence/SentEval/data/downstream/SNLI/",)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def record(pack: Path) -> dict[str, dict[str, list]]:
    out: dict[str, dict[str, list]] = {}
    for name, globs in PACK_GLOBS.items():
        files = sorted({p for g in globs for p in pack.glob(g) if p.is_file()})
        rows = {}
        for path in files:
            rel = path.relative_to(pack).as_posix()
            if not rel.startswith(EXCLUDE) and not path.name.startswith("."):
                rows[rel] = [path.stat().st_size, sha256(path)]
        if not rows:
            raise SystemExit(f"error: no pack files for {name} ({globs}) under {pack}")
        out[name] = rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pack", nargs="?", default=os.environ.get("CL_PLUGINS_DATA", "../shared/data"),
                        help="the data pack's root (default: $CL_PLUGINS_DATA, else ../shared/data)")  # fmt: skip
    default = Path(__file__).parents[1] / "integrations/data/data_files.json"
    parser.add_argument("--output", default=str(default))
    args = parser.parse_args()
    table = record(Path(args.pack))
    tmp = Path(args.output).with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, args.output)
    print(f"{sum(len(v) for v in table.values())} files of {len(table)} entries -> {args.output}")


if __name__ == "__main__":
    main()
