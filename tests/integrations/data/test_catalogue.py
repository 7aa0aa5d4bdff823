"""The data registry against the data pack and the loaders: recorded checksums are the pack's, every path a
loader asks for belongs to an entry, and ``cl-plugins data`` reports present / missing / corrupt."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from cl_plugins.integrations.data import catalogue
from cl_plugins.integrations.data.cli import main as data_main
from tests import ROOT


def _checksum_script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("data_checksums", ROOT / "scripts" / "data_checksums.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_recorded_checksums_are_the_packs(data_root: Path) -> None:
    recorded = json.loads(catalogue.FILES_JSON.read_text())
    assert _checksum_script().record(data_root) == recorded


def test_every_pack_entry_is_present_and_verified(data_root: Path) -> None:
    for name in _checksum_script().PACK_GLOBS:
        assert catalogue.status(catalogue.get(name)) == ("present", []), name


def _loader_calls(data_root: Path) -> None:
    """Every loader's path lookup for its default data (cheap calls: path resolution, small readers)."""
    from cl_plugins.integrations.evaluation.bias.crows_pairs import load_crows_pairs
    from cl_plugins.integrations.evaluation.bias.seat import load_seat_test
    from cl_plugins.integrations.evaluation.bias.stereoset import load_intrasentence
    from cl_plugins.integrations.evaluation.senteval import readers
    from cl_plugins.integrations.hosts.dcrec.splits import source_files
    from cl_plugins.integrations.hosts.graph import datasets, molecules
    from cl_plugins.integrations.hosts.graph.graphcl_transfer import TransferConfig
    from cl_plugins.integrations.hosts.mabel.counterfactual import load_word_pairs
    from cl_plugins.integrations.hosts.simcse.train_then_evaluate import wiki_file
    from cl_plugins.integrations.modalities.images import datasets as vision_data

    for year in readers.STS_SUBSETS:
        readers.read_sts_year(year)
    for split in ("train", "dev", "test"):
        readers.read_stsb(split)
    readers.read_sick("test"), readers.read_sick_entailment_pairs()
    for task in ("MR", "CR", "SUBJ", "MPQA"):
        readers.read_binary(task)
    readers.read_sst2(), readers.read_trec(), readers.read_mrpc()
    wiki_file(paper=False)
    load_seat_test("weat1"), load_word_pairs(), load_crows_pairs(), load_intrasentence()
    for name in ("MUTAG", "PROTEINS", "NCI1", "IMDB-BINARY"):
        datasets._registered_raw(datasets.TU_SUBDIR, name)
    for name in ("Cora", "CiteSeer"):
        datasets._registered_raw(datasets.PLANETOID_SUBDIR, name)
    for name in TransferConfig().datasets:
        molecules._find_csv(molecules.data_path(Path("molecules/dataset") / name / "raw"))
    molecules._molecules_base()
    source_files("beauty"), source_files("ml-100k")
    vision_data._cifar_base()


def test_every_path_a_loader_reads_has_an_entry(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    find = catalogue.find
    monkeypatch.setattr(catalogue, "find", lambda rel: asked.append(Path(rel).as_posix()) or find(rel))
    _loader_calls(data_root)
    assert len(asked) > 30
    orphans = sorted({rel for rel in asked if not catalogue.owners(rel)})
    assert orphans == [], f"paths the loaders read that no registry entry holds: {orphans}"
    for rel in ("images/FashionMNIST/raw", "recsys/movielens/ml-1m/ratings.dat"):  # loaders' other defaults
        assert catalogue.owners(rel)


def test_cli_list_and_verify(data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    data_main(["list"])
    listing = capsys.readouterr().out
    for name in catalogue.registry():
        assert name in listing
    assert "senteval             present" in listing and "wiki1m               missing" in listing
    data_main(["verify", "crows-pairs", "fashion-mnist"])
    assert "crows-pairs          present" in capsys.readouterr().out
    copy = tmp_path / "data"
    shutil.copytree(data_root / "bias/crows_pairs", copy / "bias/crows_pairs")
    (copy / "bias/crows_pairs/crows_pairs_anonymized.csv").write_text("sent_more,sent_less\n")
    monkeypatch.setenv("CL_PLUGINS_DATA", str(copy))
    with pytest.raises(SystemExit) as exit_:
        data_main(["verify", "crows-pairs"])
    out = capsys.readouterr().out
    assert exit_.value.code == 1 and "crows-pairs          corrupt" in out and "expected 437764" in out


def test_unknown_name_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        data_main(["download", "no-such-set"])
    assert exit_.value.code == 2 and "unknown dataset 'no-such-set'" in capsys.readouterr().err


def test_an_entry_without_source_says_so(data_root: Path) -> None:
    with pytest.raises(FileNotFoundError, match="cifar10-jpg has no download source"):
        catalogue.fetch(catalogue.get("cifar10-jpg"))


def test_docs_table_is_the_registry() -> None:
    from cl_plugins.integrations.data.cli import markdown_table

    assert markdown_table() in (ROOT / "docs" / "data.md").read_text(), "regenerate: cl-plugins data list --markdown"
