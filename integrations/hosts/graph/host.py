"""The graph host's declaration: GraphCL (TU, transfer) and GRACE / PyGCL."""

from __future__ import annotations

from pathlib import Path

from cl_plugins.integrations.data.catalogue import Dataset, Source, github, pack
from cl_plugins.integrations.data.downloads import Expected
from cl_plugins.integrations.hosts import Command, Host


def _graph_sets() -> list[Dataset]:
    out = []
    for name in ("Cora", "CiteSeer"):
        files = pack(f"planetoid-{name.lower()}")
        sources = github("kimiyoung/planetoid", "af6abf4", files, lambda t: "data/" + Path(t).name)
        out.append(Dataset(f"planetoid-{name.lower()}", f"Planetoid {name} (ind.* files)", files, sources, "MIT",
                           "data pack, byte-identical to the repository", "PyG's Planetoid download (same files)"))
    for name in ("MUTAG", "PROTEINS", "NCI1", "IMDB-BINARY"):
        files = {t: e for t, e in pack(f"tu-{name.lower()}").items() if not t.endswith("README.txt")}
        source = Source(f"https://www.chrsmrrs.com/graphkerneldatasets/{name}.zip", f"graphs/tu/{name}/raw", "archive",
                        anchor=f"{name}_A.txt")  # fmt: skip
        out.append(Dataset(f"tu-{name.lower()}", f"TU {name}", files, (source,),
                           "TU collection: free for research, cite Morris et al. 2020",
                           "data pack (TU raw files as committed by GraphCL-era repositories; the zip's hash is not "
                           "published)", "PyG's TUDataset download (same URL)"))  # fmt: skip
    return out



def _molecule_sets() -> list[Dataset]:
    out = []
    for name in ("bace", "bbbp", "clintox", "sider", "tox21"):
        files = pack(f"moleculenet-{name}")
        out.append(Dataset(f"moleculenet-{name}", f"MoleculeNet {name.upper()} (chemprop's cleaned CSV)", files,
                           github("chemprop/chemprop", "f814b63e", files, lambda t: "data/" + Path(t).name),
                           "chemprop MIT; MoleculeNet data per original sources",
                           "data pack, byte-identical to the repository",
                           "pretrain-gnns' chem_dataset.zip holds other cleanings of the same sets"))  # fmt: skip
    zinc = pack("zinc-jtnn")
    out.append(Dataset("zinc-jtnn", "ZINC-250k SMILES, JT-VAE's valid/test splits (pre-training substitute)", zinc,
                       github("wengong-jin/icml18-jtnn", "d4c425a", zinc,
                              lambda t: "data/zinc/" + Path(t).name.removeprefix("jtnn_zinc250k_")),
                       "MIT (repository); ZINC free to use", "data pack, byte-identical to the repository",
                       "zinc_standard_agent of pretrain-gnns is not downloadable as a single small file"))  # fmt: skip
    agent, csv = "molecules/dataset/zinc_standard_agent", "raw/zinc_combined_apr_8_2019.csv.gz"
    out.append(Dataset("zinc-standard-agent", "Hu et al.'s 2M ZINC pre-training molecules (only on request: the "
                       "archive holds all of pretrain-gnns' data)", {f"{agent}/{csv}": Expected()},
                       (Source("http://snap.stanford.edu/gnn-pretrain/data/chem_dataset.zip", agent, "archive",
                               anchor=csv),),
                       "pretrain-gnns MIT; ZINC free to use", "unknown: not published, not in the pack",
                       "pretrain-gnns' chem_dataset.zip (GraphCL's transfer README points to it)"))  # fmt: skip
    return out


_HERE = __name__.rpartition(".")[0]

HOST = Host(
    "graph", "GraphCL (You et al., 2020) on TU graphs and molecules, GRACE (Zhu et al., 2020) and PyGCL on nodes",
    commands=(Command("graphcl-tu", f"{_HERE}.graphcl_tu", "GraphCL unsupervised TU graph classification",
                      f"{_HERE}.configs:TUConfig"),
              Command("graphcl-transfer", f"{_HERE}.graphcl_transfer", "GraphCL molecule pre-training and MoleculeNet",
                      f"{_HERE}.configs:TransferConfig"),
              Command("grace", f"{_HERE}.grace", "GRACE node classification (Planetoid)",
                      f"{_HERE}.configs:GraceConfig"),
              Command("graph-eval", f"{_HERE}.evaluate", "evaluate a saved graph encoder",
                      f"{_HERE}.configs:evaluate_parser")),
    datasets=lambda: [*_graph_sets(), *_molecule_sets()],
    patches={"graphcl_tu": "patch_graphcl_tu", "graphcl_transfer": "patch_graphcl_transfer",
             "grace": "patch_grace", "pygcl": "patch_pygcl"},
    configs=(f"{_HERE}.configs:TUConfig", f"{_HERE}.configs:TransferConfig", f"{_HERE}.configs:GraceConfig"),
    docs="graph.md",
)  # fmt: skip
