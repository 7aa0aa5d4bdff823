"""The prepared GPU check runs on the CPU (``--device cpu --quick``), so that it never rots between GPUs: every
part reports, nothing fails, the tables have their rows, and the packed checkpoints open."""

from __future__ import annotations

import json
import tarfile

import pytest

from benchmarks import gpu_check, gpu_trainers


@pytest.mark.slow
def test_quick_check_on_the_cpu(tmp_path, monkeypatch):
    from tests.integrations.conftest import _data_root

    if _data_root() is None:
        pytest.skip("data pack not found: set CL_PLUGINS_DATA")
    monkeypatch.setenv("CL_PLUGINS_DATA", str(_data_root()))
    out = tmp_path / "out"
    data = gpu_check.main(["--device", "cpu", "--quick", "--out", str(out), "--budget_s", "300"])
    assert json.loads((out / "gpu_check.json").read_text()) == json.loads(json.dumps(data, default=str))
    assert data["environment"]["device"] == "cpu" and "finished" in data
    (tests,) = data["tests"]
    assert tests["returncode"] == 0 and tests["tests"] > 50 and tests["failures"] == tests["errors"] == 0
    assert {r["trainer"]: r.get("returncode") for r in data["trainers"]} == dict.fromkeys(
        ["graphcl_tu", "graphcl_tu_short", "grace"], 0
    )
    assert 0 < data["trainers"][0]["result"]["accuracy_mean"] <= 100
    runs = {r["part"]: r for r in data["compiled"]}
    assert [r.get("returncode") for r in runs.values()] == [0, 0], runs
    assert any(line.startswith("| infonce | simclr | none |") for line in runs["compiled_matrix"]["table"])
    assert any(line.startswith("| infonce | SimCLR | 16 |") for line in runs["compiled_step"]["table"])
    sweep = [row for row in data["kernel_sweep"] if row["row"].startswith("triton")]  # Triton's interpreter here
    assert {row["stage"] for row in sweep} == {"1 configurations", "2 chunks of D", "3 N"}
    assert all(row["loss_err"] < 1e-6 and row["grad_err"] < 1e-5 for row in sweep), sweep
    assert all(row["x_floor_bytes"] > 0 and row["x_floor_fp32"] > 0 for row in sweep), sweep
    table = data["loss_table"]
    assert all("ms" in row for row in table), [row for row in table if "ms" not in row]
    assert {row["strategy"] for row in table} >= {"matmul x4", "F.cross_entropy", "open_clip ClipLoss", "macl"}
    assert all(row["x_bound"] > 0 for row in table if row["kernel"] != "stream" or "tiles" not in row["strategy"])
    with tarfile.open(out / "cuda_checkpoints.tar.gz") as tar:
        names = tar.getnames()
    assert "graphcl_tu/seed_0/model/model.safetensors" in names
    assert any(n.startswith("graphcl_tu_short/seed_0/checkpoints/step_") for n in names)
    assert "| graphcl_tu | 0 |" in (out / "gpu_check.md").read_text()


def test_the_floors_by_hand():
    """8 N^2 D operations at the matrix rates, 24 N D bytes at the copy bandwidth."""
    from benchmarks.gpu_kernel_sweep import floors

    out = floors(1000, 100, {"fp32": 1.0, "bf16": 2.0, "gb_s": 1000.0})
    assert out == {"floor_ms_fp32": 0.8, "floor_ms_bf16": 0.4, "floor_ms_bytes": 0.0024}


def test_headline_keeps_the_first_numbers_and_leaves_out_timings_and_settings():
    results = {"settings": {"lr": 1.0}, "train_seconds": 3.0, "runs": [{"acc": 0.5, "ok": True, "seed": 1}], "mean": 2}
    assert gpu_trainers.headline(results) == {"runs.0.acc": 0.5, "mean": 2.0}
    assert len(gpu_trainers.headline({"x": list(range(10))}, limit=3)) == 3


def test_the_parity_tests_it_names_exist():
    """The check's framework part runs tests by node id: a renamed file must fail here, not on the GPU."""
    from pathlib import Path

    root = Path(gpu_check.ROOT)
    for module, test in gpu_check.PARITY:
        path = root / "tests/integrations/frameworks" / f"test_{module}.py"
        assert f"def test_{test}(" in path.read_text(), (path, test)


def test_the_map_cost_variants_are_the_losses_they_claim(tmp_path):
    """benchmarks/gpu_map_cost.py under Triton's interpreter: the other forms give their strategy's loss, the
    floors do not (they would time something else), and every row reports."""
    from benchmarks import gpu_map_cost

    rows = gpu_map_cost.main(["--n", "48", "--d", "16", "--reps", "1", "--device", "cpu", "--out", str(tmp_path)])
    by = {(r["strategy"], r["variant"]): r for r in rows}
    assert all("ms" in r for r in rows), rows
    assert by[("dystress", "tl.cos, two divisions (until 2026-11-28)")]["loss_diff"] < 1e-6
    for variant in ("two divisions (until 2026-11-28)", "log2, one division"):
        assert by[("temperature_free", variant)]["loss_diff"] < 1e-6
    assert by[("dystress", "constant temperature (floor)")]["loss_diff"] > 1e-3
    assert "| dystress | own |" in (tmp_path / "map_cost.md").read_text()
