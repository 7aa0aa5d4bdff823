"""The one saved-model format: read back exactly, refused in one line when it is not what an entry point expects
(another trainer's, truncated, not ours), never unpickled; text encoders load in sentence-transformers with the
pooler and head our evaluator uses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from cl_plugins.integrations.modalities.text.testing import make_tiny_bert
from cl_plugins.integrations.runs import atomic, saved_model
from tests import ROOT

TRAINERS = ("graphcl_tu", "grace", "graphcl_transfer", "dcrec", "vision", "simcse", "mabel")


HOSTS = "cl_plugins.integrations.hosts."


def _write(folder: Path, trainer: str, weights: dict | None = None) -> Path:
    weights = weights or {"w": torch.arange(6.0).view(2, 3)}
    saved_model.write(folder, trainer, model={"num_features": 3}, run={"loss": "macl", "loss_args": {}},
                      weights=weights, records={"epoch_loss": [1.5]})  # fmt: skip
    return folder


def test_a_saved_model_reads_back_exactly(tmp_path):
    shared = torch.randn(4, 3)
    folder = _write(tmp_path / "model", "grace", {"a": shared, "b": shared[:2]})  # shared memory: cloned
    saved = saved_model.read(folder / saved_model.WEIGHTS, ["grace"], "run model")  # a file inside names it too
    assert saved.trainer == "grace" and saved.path == folder and saved.model == {"num_features": 3}
    assert torch.equal(saved.weights["a"], shared) and torch.equal(saved.weights["b"], shared[:2])
    assert saved.run["loss"] == "macl" and saved.records == {"epoch_loss": [1.5]}
    assert atomic.is_complete(folder)


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda f: None, "it was written by grace"),
        (lambda f: (f / saved_model.INFO).unlink(), "a folder without cl_plugins.json"),
        (lambda f: (f / saved_model.INFO).write_text('{"format": "cl-plugins saved mo'), "not readable JSON"),
        (lambda f: (f / saved_model.INFO).write_text("{}"), "not a cl-plugins saved-model description"),
        (lambda f: (f / saved_model.WEIGHTS).write_bytes((f / saved_model.WEIGHTS).read_bytes()[:40]), "cut short"),
        (lambda f: (f / saved_model.WEIGHTS).unlink(), "has no weights"),
    ],
)
def test_what_is_not_expected_is_refused_in_one_line(tmp_path, damage, named):
    folder = _write(tmp_path / "model", "grace")
    damage(folder)
    trainers = ["dcrec"] if named.startswith("it was written") else ["grace"]
    with pytest.raises((ValueError, FileNotFoundError), match=named) as info:
        saved_model.read(folder, trainers, "run model")
    assert "\n" not in str(info.value)


def _cross_cases(tmp_path: Path) -> list[tuple[list[str], str]]:
    """(command, the trainer whose folder it is given) for every evaluation entry point."""
    other = {name: _write(tmp_path / name, name) for name in TRAINERS}
    return [
        ([HOSTS + "graph.evaluate", "tu", "--checkpoint", str(other["grace"])], "grace"),
        ([HOSTS + "graph.evaluate", "node", "--checkpoint", str(other["graphcl_tu"])], "graphcl_tu"),
        ([HOSTS + "graph.evaluate", "molecule", "--checkpoint", str(other["vision"])], "vision"),
        ([HOSTS + "graph.graphcl_transfer", "--input_model", str(other["dcrec"] / saved_model.WEIGHTS),
          "--output_dir", str(tmp_path / "out_transfer")], "dcrec"),  # fmt: skip
        ([HOSTS + "dcrec.evaluate", str(other["graphcl_transfer"])], "graphcl_transfer"),
        ([HOSTS + "msc.anomaly", "--backbone_path", str(other["simcse"]), "--log_with", "none",
          "--output_dir", str(tmp_path / "out_msc")], "simcse"),  # fmt: skip
        ([HOSTS + "vision.train", "--help"], ""),  # vision has no evaluation entry of its own
        ([HOSTS + "simcse.evaluate", "--model", str(other["vision"])], "vision"),
        ([HOSTS + "mabel.evaluate", str(other["dcrec"])], "dcrec"),
    ]


def test_each_trainers_folder_given_to_another_entry_point_is_named_in_one_line(tmp_path, capsys):
    import importlib

    for argv, wrong in _cross_cases(tmp_path):
        if not wrong:
            continue
        main = importlib.import_module(argv[0]).main
        with pytest.raises(SystemExit) as exit_info:
            main(argv[1:])
        err = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2 and len(err) == 1, (argv, err)
        assert f"written by {wrong}" in err[0], err[0]
    assert not (tmp_path / "out_transfer").exists() and not (tmp_path / "out_msc").exists()


class _Exploit:
    """Unpickling this runs code (it writes a marker file): what a crafted file could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204
        return (Path.write_text, (self.marker, "pwned"))


def test_crafted_pickles_in_published_weights_and_caches_are_never_run(tmp_path, capsys):
    from cl_plugins.integrations.hosts.graph.graphcl_transfer import main as transfer

    marker = tmp_path / "marker"
    crafted = tmp_path / "published_gin.pth"
    torch.save({"gnn": _Exploit(marker)}, crafted)
    with pytest.raises(SystemExit):
        transfer(["--input_model", str(crafted), "--output_dir", str(tmp_path / "out"), "--log_with", "none"])
    assert "never unpickled" in capsys.readouterr().err and not marker.exists()
    cache = tmp_path / "cache.pt"
    torch.save([_Exploit(marker)], cache)
    with pytest.warns(UserWarning, match="rebuilding the unreadable cache"):
        assert atomic.load_cache(cache) is None
    assert not marker.exists() and not cache.exists()


# ---------------------------------------------------------------------------- text encoders in sentence-transformers
SENTENCES = ["a man is playing a guitar .", "the cat sat on the mat", "two dogs run", "it rains"]


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("bert") / "bert", hidden=32, layers=3)


@pytest.mark.parametrize(
    ("pooler", "head", "mlp_only_train"),
    [("cls", "simcse", True), ("cls", "simcse", False), ("cls", "mabel", False), ("cls_before_pooler", "simcse", False),
     ("avg", "simcse", False), ("avg_top2", "simcse", False), ("avg_first_last", "simcse", False)],
)  # fmt: skip
def test_sentence_transformers_embeds_as_our_evaluator(tiny_encoder, tmp_path, pooler, head, mlp_only_train):
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    import cl_plugins as clp
    from cl_plugins.integrations.modalities.text.config import TrainConfig
    from cl_plugins.integrations.modalities.text.encoder import SimCSEModel
    from cl_plugins.integrations.modalities.text.sentence_encoder import load_encoder
    from cl_plugins.integrations.modalities.text.trainer import save_model

    torch.manual_seed(0)
    model = SimCSEModel(AutoModel.from_pretrained(str(tiny_encoder)), clp.build_loss("infonce"), pooler=pooler,
                        mlp_only_train=mlp_only_train, head=head)  # fmt: skip
    if model.mlp is not None:
        for p in model.mlp.parameters():  # a trained head, not the identity-like initialisation
            torch.nn.init.normal_(p, std=0.3)
    config = TrainConfig(model=str(tiny_encoder), train_file="unused.txt", pooler=pooler, mlp_only_train=mlp_only_train)
    save_model(model.eval(), AutoTokenizer.from_pretrained(str(tiny_encoder)), tmp_path / "final", config)
    ours = load_encoder(tmp_path / "final")(SENTENCES)
    theirs = SentenceTransformer(str(tmp_path / "final"), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-5)
    info = json.loads((tmp_path / "final" / saved_model.INFO).read_text())
    assert info["trainer"] == "simcse" and info["model"]["pooler"] == pooler


def _graph_model(folder: Path) -> Path:
    from cl_plugins.integrations.hosts.graph.graphcl_tu import TUConfig, build_model
    from cl_plugins.integrations.hosts.graph.trainer import save_run_model

    config = TUConfig(output_dir=str(folder.parent / "run"), hidden=8, num_layers=2)
    save_run_model(folder, "graphcl_tu", config, 7, build_model(config, 7))
    return folder


def _edit(folder: Path, change) -> None:  # noqa: ANN001
    info = json.loads((folder / saved_model.INFO).read_text())
    change(info)
    (folder / saved_model.INFO).write_text(json.dumps(info))


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda i: i.pop("model"), "lacks 'model'"),
        (lambda i: i.update(model=[]), "'model' must be an object, got list"),
        (lambda i: i.update(extra=1), "keys ['extra'] that no cl-plugins saved model has"),
        (lambda i: i["model"].pop("num_features"), "described by ['num_features'], got []"),
        (lambda i: i["model"].update(extra=1), "described by ['num_features'], got ['extra', 'num_features']"),
        (lambda i: i["model"].update(num_features="seven"), "does not describe a graphcl_tu model that can be built"),
        (lambda i: i["model"].update(num_features=10**9), "(first at encoder."),
        (lambda i: i["model"].update(num_features=-3), "does not describe a graphcl_tu model"),
        (lambda i: i["run"].update(hidden=10**7), "(first at encoder."),
        (lambda i: i["run"].update(num_layers=10**6), "more tensors than model.safetensors holds"),
        (lambda i: i["run"].update(hidden="wide"), "run setting 'hidden' must be a int, got 'wide'"),
        (lambda i: i["run"].update(surprise=True), "settings ['surprise'] that TUConfig does not have"),
        (lambda i: i["run"].update(loss="bogus"), "model that can be built (ValueError: unknown loss 'bogus'"),
    ],
)
def test_a_crafted_description_is_refused_before_any_module_is_built(tmp_path, change, named):
    """KeyErrors and TypeErrors, and sizes that allocated gigabytes before the weights were compared."""
    import time

    from cl_plugins.integrations.hosts.graph.graphcl_tu import TUConfig, build_model
    from cl_plugins.integrations.hosts.graph.trainer import load_run_model

    folder = _graph_model(tmp_path / "model")
    assert load_run_model(folder, "graphcl_tu", TUConfig, build_model)[0].hidden == 8
    _edit(folder, change)
    start = time.perf_counter()
    with pytest.raises(ValueError) as info:
        load_run_model(folder, "graphcl_tu", TUConfig, build_model)
    assert named in str(info.value) and "\n" not in str(info.value) and time.perf_counter() - start < 10


@pytest.mark.parametrize(("change", "named"), [({"width": 10**7}, r"\(first at "), ({"arch": "resnet9"}, "resnet9"),
                                               ({"in_channels": "three"}, "model.mean must be None finite"),
                                               ({"image_size": 10**9}, "image_size must be an integer from 8"),
                                               ({"image_size": "seven"}, "image_size must be an integer"),
                                               ({"std": [0.2, 0.0, 0.2]}, "std must be 3 finite positive"),
                                               ({"depth": 50}, r"got \['arch', .*'depth'")])  # fmt: skip
def test_a_crafted_backbone_description_is_refused_before_it_allocates(change, named, tmp_path):
    import shutil

    from cl_plugins.integrations.modalities.images.backbone import load_backbone

    folder = tmp_path / "backbone"
    shutil.copytree((ROOT / "tests") / "fixtures" / "cuda_saved" / "vision" / "backbone", folder)
    load_backbone(folder)
    _edit(folder, lambda info: info["model"].update(change))
    with pytest.raises(ValueError, match=named) as info:
        load_backbone(folder)
    assert "\n" not in str(info.value)


def test_a_model_of_another_width_than_its_data_or_flags_is_refused_in_one_line(data_root, tmp_path, capsys):
    """an edited run.dataset and an --input_model of another --emb_dim gave shape-mismatch tracebacks."""
    from cl_plugins.integrations.console import main
    from cl_plugins.integrations.hosts.graph.encoders import MoleculeGIN

    folder = _graph_model(tmp_path / "model")
    _edit(folder, lambda info: info["run"].update(dataset="PROTEINS"))  # 3 node features, not MUTAG's 7
    gin = tmp_path / "gin.pt"
    torch.save(MoleculeGIN(2, 8).state_dict(), gin)
    cases = [(["graph-eval", "tu", "--checkpoint", str(folder)], "trained on 7 node features, but its run's dataset "
              "PROTEINS has 3"),
             (["graphcl-transfer", "--input_model", str(gin), "--num_layers", "2", "--emb_dim", "16", "--output_dir",
               str(tmp_path / "t"), "--log_with", "none"], "is not a GIN of --num_layers 2 --emb_dim 16 (first at ")]
    for argv, named in cases:
        with pytest.raises(SystemExit) as info:
            main(argv)
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.count("error: ") == 1 and named in err and "Traceback" not in err, err
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(("num_layers", "named"), [(10**9, "more tensors than"), ("seven", "num_layers")])
def test_graph_eval_molecule_refuses_a_crafted_depth_within_a_second(tmp_path, capsys, num_layers, named):
    """A graphcl_transfer folder whose run says 10⁹ layers grew 0.85 GB a minute; now the GIN it describes is built
    on the meta device up to the saved file's tensor count, and refused in one line."""
    import time
    from dataclasses import asdict

    from cl_plugins.integrations.hosts.graph.configs import TransferConfig
    from cl_plugins.integrations.hosts.graph.encoders import MoleculeGIN
    from cl_plugins.integrations.hosts.graph.evaluate import main

    config = TransferConfig(num_layers=2, emb_dim=8, output_dir=str(tmp_path / "run"))
    saved_model.write(tmp_path / "model", "graphcl_transfer", model={"num_layers": 2, "emb_dim": 8},
                      run=asdict(config), weights=MoleculeGIN(2, 8).state_dict())  # fmt: skip
    _edit(tmp_path / "model", lambda i: i["run"].update(num_layers=num_layers))
    start = time.perf_counter()
    with pytest.raises(SystemExit):
        main(["molecule", "--checkpoint", str(tmp_path / "model"), "--datasets", "bace", "--output_dir",
              str(tmp_path / "eval")])  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("error: ") == 1 and named in err and "Traceback" not in err, err
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(("change", "named"), [({"num_hidden_layers": 100_000}, "more tensors than model.safetensors"),
                                               ({"hidden_size": 10**9}, "config.json describes "),
                                               ({"num_hidden_layers": int("9" * 30)}, "an integer of 30 digits")])
def test_simcse_eval_refuses_a_crafted_config_json_within_a_second(tiny_encoder, tmp_path, capsys, change, named):
    """A folder whose config.json asked for 100,000 layers allocated 5.3 GB for 235 s; now it is built on the meta
    device up to the weights' tensor count, and its shapes compared with them, first."""
    import shutil
    import time

    from cl_plugins.integrations.hosts.simcse.evaluate import main

    folder = tmp_path / "bert"
    shutil.copytree(tiny_encoder, folder)
    described = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**described, **change}))
    start = time.perf_counter()
    with pytest.raises(SystemExit):
        main(["--model", str(folder), "--tasks", "STSBenchmark", "--cache_dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err
    assert err.count("error: ") == 1 and named in err and "Traceback" not in err, err
    assert time.perf_counter() - start < 5
