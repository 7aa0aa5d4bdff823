"""The claims table's verdicts and rows, on synthetic result rows whose answers are computed by hand."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from benchmarks import claims
from benchmarks.paired_stats import Interval
from cl_plugins.integrations.runs.guard import MANIFEST


def test_gain_verdicts() -> None:
    def v(low: float, high: float, claimed: float = 2.0) -> str:
        return claims.gain_verdict(Interval((low + high) / 2, low, high, 5), claimed)

    assert v(0.5, 3.0) == "reproduced"
    assert v(0.5, 1.5) == "reproduced (gain smaller than claimed)"
    assert v(-1.0, 1.0) == "not reproduced"
    assert v(-3.0, -1.0) == "not reproduced (worse)"
    assert v(-1.0, 3.0).startswith("inconclusive")
    assert claims.level_verdict(Interval(67.0, 66.5, 67.5, 20), 67.33) == "reproduced"
    assert claims.level_verdict(Interval(70.0, 69.5, 70.5, 20), 67.33) == "not reproduced (ours above)"


def _grace(strategy: str, params: dict, seed: int, micro: float) -> dict:
    return {"experiment": "grace-pygcl", "dataset": "CiteSeer", "strategy": strategy, "params": params, "seed": seed,
            "micro_f1": micro, "macro_f1": micro - 5, "seconds": 10.0}  # fmt: skip


def test_grace_rows_pair_by_seed() -> None:
    free_scores = (68.0, 66.0, 67.0, 68.0, 66.0)
    runs = [_grace("temperature_free", {}, s, m) for s, m in enumerate(free_scores)]
    runs += [_grace("infonce", {"tau": 0.5}, s, m - 1) for s, m in enumerate(free_scores)]
    rows = {r.claim: r for r in claims.grace_rows(runs)}
    free, diff = rows["temperature-free: 67.95"], rows["free − τ 0.5: +0.62"]
    # free: mean 67, sd 1, t(0.975, 4) 2.776445 / sqrt(5) = 1.242: [65.76, 68.24] holds 67.95
    assert free.number == "67.00 [65.76, 68.24] (n 5)" and free.verdict == "reproduced"
    assert "runs incomplete: 5 of 20 seeds" in free.ours
    # paired differences are all 1: the interval is [1, 1], above 0
    assert diff.number == "+1.00 [+1.00, +1.00] (n 5)" and diff.verdict == "reproduced"
    assert rows["τ 0.1: 58.94"].verdict == "pending"
    # F1-macro rows are the same runs' macro scores (micro − 5) against the paper's macro numbers
    macro = rows["temperature-free: 60.56"]
    assert macro.number == "62.00 [60.76, 63.24] (n 5)" and macro.verdict == "not reproduced (ours above)"
    assert "F1-macro" in macro.setting and rows["free − τ 0.5: +0.09"].number == "+1.00 [+1.00, +1.00] (n 5)"
    few = {r.claim: r for r in claims.grace_rows(runs[:2] + runs[5:7])}
    assert few["temperature-free: 67.95"].verdict == "inconclusive (2 seeds, fewer than 5)"


def test_every_claim_has_a_verdict_and_the_matrix_marks_cells() -> None:
    table = claims.claims_table([])
    body = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| paper")]
    assert len(body) == 2 * 5 + 4 + len(claims.GPU_CLAIMS) + len(claims.NOT_RUNNABLE)  # GRACE: micro and macro
    assert all(line.rstrip(" |").split(" | ")[-1] for line in body)
    runs = [{"experiment": "graphcl-tu", "dataset": "MUTAG", "strategy": s, "params": p, "seed": seed,
             "accuracy": acc, "seconds": sec}
            for s, p, sec, accs in (("infonce", {}, 2.0, [80.0, 82.0, 81.0]),
                                    ("macl", claims.MACL_GRAPHCL, 3.0, [82.0, 84.0, 83.0]))
            for seed, acc in enumerate(accs)]  # fmt: skip
    cell = claims.tu_column(runs, "MUTAG")
    assert cell["macl"][0] == {0: 82.0, 1: 84.0, 2: 83.0} and cell["macl"][1] == 3.0
    text = claims.matrix(runs)
    assert "+2.00 [+2.00, +2.00] (n 3) better; cost ×1.50" in text


def test_runner_plans_seed_major_and_keys_rows_by_setting() -> None:
    from benchmarks import claims_runs

    assert claims_runs.seeds_arg("0-3") == [0, 1, 2, 3] and claims_runs.seeds_arg("7") == [7]
    plan = list(claims_runs.planned("grace-pygcl", ["CiteSeer"], [0, 1], None))
    # every setting's seed 0 before any seed 1: a stopped run leaves paired, balanced seeds
    assert [p["seed"] for p in plan] == [0] * 5 + [1] * 5
    assert [p["params"] for p in plan[:5]] == [{"tau": 0.1}, {"tau": 0.25}, {"tau": 0.5}, {"tau": 1.0}, {}]
    a, b = plan[0], plan[1]
    assert claims_runs.row_key(a) != claims_runs.row_key(b)  # τ is part of the key
    assert claims_runs.row_key({**a, "micro_f1": 1.0}) == claims_runs.row_key(a)  # scores are not
    only = list(claims_runs.planned("graphcl-tu", ["MUTAG"], [0], ["macl"]))
    assert only == [{"experiment": "graphcl-tu", "dataset": "MUTAG", "strategy": "macl", "params": claims.MACL_GRAPHCL,
                     "seed": 0}]  # fmt: skip


def test_the_simcse_note_states_the_feasibility_run(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(claims, "RESULTS", tmp_path)
    assert "not been tried" in claims.simcse_note()
    run = {"levels": {"reinit_before": 55.0, "bag_of_embeddings": 62.5, "minilm": 86.7}, "best": 61.25,
           "verdict": "not runnable here: ...", "lr": 1e-4, "steps": 800, "seconds_per_step": 1.5}  # fmt: skip
    (tmp_path / "simcse_reinit.json").write_text(json.dumps(run))
    note = claims.simcse_note()
    assert "55.00 before training and 61.25 at best, against 62.50" in note and "86.70" in note
    assert note.endswith("not runnable here: ....")


def test_the_tau_search_line_compares_free_with_every_tau() -> None:
    free_scores = (68.0, 66.0, 67.0, 68.0, 66.0)
    runs = [_grace("temperature_free", {}, s, m) for s, m in enumerate(free_scores)]
    offsets = {0.1: 9.0, 0.25: 5.0, 0.5: 0.0, 1.0: 0.0}  # τ 0.5 and 1 tie free on two seeds each way
    for tau, off in offsets.items():
        jitter = (1.0, -1.0, 0.0, 1.0, -1.0) if off == 0 else (0.0,) * 5
        runs += [_grace("infonce", {"tau": tau}, s, m - off + j) for s, (m, j) in enumerate(zip(free_scores, jitter))]
    (line,) = [x for x in claims.tau_search_lines(runs) if x]
    assert "τ 0.1: +9.00 [+9.00, +9.00] (n 5) better" in line and "τ 0.5: +0.00" in line
    assert line.endswith("it spares the τ search without beating a tuned τ.")
    assert claims.tau_search_lines(runs[:4]) == []  # fewer than 5 seeds: no line


def _setting_rows(experiment: str, datasets: tuple[str, ...], seeds: tuple[int, ...]) -> list[dict]:
    from benchmarks.claims_runs import SETTINGS

    return [{"experiment": experiment, "dataset": d, "strategy": s, "params": p, "seed": seed}
            for d in datasets for s, p in SETTINGS[experiment] for seed in seeds]  # fmt: skip


def test_the_pending_note_counts_the_least_run_setting_per_dataset() -> None:
    runs = _setting_rows("vision-lt", ("cifar10_lt",), (0, 1))
    runs += [{**r, "seed": 2} for r in runs if r["strategy"] != "macl" and r["seed"] == 0]  # macl lags
    note = claims.pending_note(runs)
    assert "DCRec ML-100K to convergence: seeds of the least-run setting, of 5 planned: ml-100k 0" in note
    assert ("100 epochs: seeds of the least-run setting, of 3 planned: cifar10 0, cifar10_lt 2 (infonce 3, macl 2, "
            "dystress 3, cosine_schedule 3, temperature_free 3) ") in note  # fmt: skip
    # complete experiments are not listed: the 200-epoch check (1 seed planned) and, once every setting has three
    # seeds on both data sets, the 100-epoch setting
    runs = _setting_rows("vision-lt-200", ("cifar10_lt",), (0,))
    runs += _setting_rows("vision-lt", ("cifar10_lt", "cifar10"), (0, 1, 2))
    note = claims.pending_note(runs)
    assert "200 epochs" not in note and "100 epochs" not in note and "DCRec" in note
    # a row of a replaced setting does not stand in for the current one
    old = {"period": 400, "period_unit": "step"}
    runs = [{**r, "params": old} if r["strategy"] == "cosine_schedule" and r["seed"] == 2 else r for r in runs]
    note = claims.pending_note(runs)
    assert "100 epochs: seeds of the least-run setting, of 3 planned: cifar10 2 (infonce 3, " in note


def _vision(experiment: str, params: dict, seed: int, knn: float, linear: float) -> dict:
    from benchmarks.claims_runs import VISION_EPOCHS

    epochs = params.get("epochs", VISION_EPOCHS.get(experiment))  # as the runner records it
    return {"experiment": experiment, "dataset": "cifar10_lt", "strategy": "infonce", "params": params, "seed": seed,
            "knn_top1": knn, "linear_top1": linear, "epochs": epochs, "seconds": 10.0}  # fmt: skip


def test_the_convergence_line_doubles_the_budget_until_it_stops_gaining() -> None:
    short = [_vision("vision-lt", {}, s, k, lin) for s, k, lin in ((0, 48.0, 49.0), (1, 48.5, 50.0))]
    assert claims.convergence_lines(short) == []  # no 200-epoch run yet
    one = [*short, _vision("vision-lt-200", {}, 0, 48.5, 50.5)]
    (line,) = [x for x in claims.convergence_lines(one) if x]
    assert "epochs: 200 − 100: knn +0.50 (n 1), linear +1.50 (n 1). So 100 epochs converge" in line
    # seed 1 adds 2.0 kNN points: mean (0.5 + 2.0) / 2 = 1.25 >= 1, t interval 1.25 ± 12.706 * 0.75
    two = [*one, _vision("vision-lt-200", {}, 1, 50.5, 50.0)]
    (line,) = [x for x in claims.convergence_lines(two) if x]
    assert "200 − 100: knn +1.25 [-8.28, +10.78] (n 2)" in line
    assert "no budget run so far converges" in line and "100 → 200 epochs still adds +1.25" in line
    three = [*two, _vision("vision-lt-epochs", {"epochs": 400}, 0, 49.0, 51.0)]
    (line,) = [x for x in claims.convergence_lines(three) if x]
    assert "; 400 − 200: knn +0.50 (n 1), linear +0.50 (n 1). So 200 epochs converge" in line


def test_cells_with_fewer_than_three_seeds_are_neither_marked_nor_counted() -> None:
    runs = [_vision("vision-lt", {}, s, k, k) for s, k in ((0, 48.0), (1, 48.5))]
    runs += [{**_vision("vision-lt", {}, s, k, k), "strategy": "macl"} for s, k in ((0, 50.0), (1, 51.0))]
    column = {"infonce": ({0: 48.0, 1: 48.5}, 1.0), "macl": ({0: 50.0, 1: 51.0}, 1.0)}
    assert claims.what_to_use({"c": column}) == ["## What to use", ""]  # 2 seeds: not counted
    text = claims.matrix(runs)
    assert "+2.25 [-0.93, +5.43] (n 2) no mark (fewer than 3 seeds)" in text  # 2.25 ± 12.706 · 0.25
    third = {"infonce": ({0: 48.0, 1: 48.5, 2: 47.0}, 1.0), "macl": ({0: 50.0, 1: 51.0, 2: 49.0}, 1.0)}
    assert "- `macl`: 1 cell: better in 1, worse in 0" in "\n".join(claims.what_to_use({"c": third}))


def test_what_to_use_calls_a_strategy_better_or_worse_only_on_repeated_marks() -> None:
    def col(gain: float) -> dict:
        return {"infonce": ({0: 50.0, 1: 51.0, 2: 49.0}, 1.0), "macl": ({0: 50 + gain, 1: 51 + gain, 2: 49 + gain},
                                                                         1.0)}  # fmt: skip

    one_better = "\n".join(claims.what_to_use({"a": col(2.0), "b": col(0.0)}))  # a constant gain: better
    assert "better in 1, worse in 0" in one_better and "No strategy is better than a fixed τ" in one_better
    two_better = "\n".join(claims.what_to_use({"a": col(2.0), "b": col(1.0), "c": col(-1.0)}))
    assert "more often than worse: `macl` (2 of 3 cells)." in two_better and "No strategy" not in two_better
    two_worse = "\n".join(claims.what_to_use({"a": col(-2.0), "b": col(-1.0), "c": col(1.0)}))
    assert "No strategy is better" in two_worse and "more often than better: `macl` (2 of 3 cells)" in two_worse


def test_the_balanced_vision_control_matches_the_long_tail_in_size() -> None:
    from benchmarks import claims_runs
    from cl_plugins.integrations.modalities.images.datasets import long_tail_counts

    long_tail = sum(long_tail_counts(claims_runs.VISION["subset_per_class"], 10, 100.0))
    assert long_tail == 1236 and abs(10 * claims_runs.BALANCED_PER_CLASS - long_tail) <= 5


def _killed_once(calls: list[bool]):
    def experiment(dataset, strategy, params, seed, workdir, resume=False):  # killed in its first sitting
        calls.append(resume)
        if len(calls) == 1:
            workdir.mkdir(parents=True)
            (workdir / MANIFEST).write_text("{}")
            time.sleep(0.5)
            raise KeyboardInterrupt
        assert (workdir / MANIFEST).is_file()
        return {"accuracy": 80.0}

    return experiment


def _run_twice(tmp_path, monkeypatch, experiment: str, dataset: str) -> tuple[list[bool], dict]:
    import sys

    from benchmarks import claims_runs

    calls: list[bool] = []
    monkeypatch.setitem(claims_runs.EXPERIMENTS, experiment, _killed_once(calls))
    monkeypatch.setattr(claims_runs, "CLOCK_SECONDS", 0.01)
    out, work = tmp_path / "rows.json", tmp_path / "work"
    argv = ["claims_runs.py", experiment, "--datasets", dataset, "--seeds", "0", "--strategies", "infonce",
            "--json", str(out), "--workdir", str(work)]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(KeyboardInterrupt):
        claims_runs.main()
    assert not out.exists() and len(list(work.iterdir())) == 1  # no row; the run's folder is kept
    claims_runs.main()
    (row,) = json.loads(out.read_text())["rows"]
    assert row["accuracy"] == 80.0 and not list(work.iterdir())  # row stored, checkpoints removed
    return calls, row


def test_a_killed_run_continues_from_its_folder_and_counts_every_sitting(tmp_path, monkeypatch) -> None:
    calls, row = _run_twice(tmp_path, monkeypatch, "dcrec-ml100k", "ml-100k")
    assert calls == [False, True] and row["sittings"] == 2 and row["seconds"] >= 0.5  # the first sitting counts


def test_a_run_that_cannot_resume_starts_over_with_a_fresh_clock(tmp_path, monkeypatch) -> None:
    calls, row = _run_twice(tmp_path, monkeypatch, "graphcl-tu", "MUTAG")
    assert calls == [False, False] and row["sittings"] == 1 and row["seconds"] < 0.5  # the first one does not


def test_the_run_clock_saves_while_the_run_is_working(tmp_path) -> None:
    from benchmarks import claims_runs

    with claims_runs.run_clock(tmp_path, every=0.01) as clock:
        time.sleep(0.1)
        saved = json.loads((tmp_path / "claims_clock.json").read_text())  # what a SIGKILL now would leave
        assert 0.05 <= saved["seconds"] <= clock()["seconds"] and saved["sittings"] == 1


def test_run_folders_are_distinct_per_setting() -> None:
    from benchmarks import claims_runs

    plan = list(claims_runs.planned("grace-pygcl", ["CiteSeer"], [0, 1], None))
    folders = {claims_runs.run_folder(Path("w"), p) for p in plan}
    assert len(folders) == len(plan) and claims_runs.run_folder(Path("w"), dict(plan[0])) in folders


def _dcrec_rows() -> list[dict]:
    """Three paired seeds: temperature_free is 1 point better in full ranking, 2 points worse against 100 sampled
    negatives; its runs took 600 s against infonce's 1,000 s (it stopped earlier)."""
    return [{"experiment": "dcrec-ml100k", "dataset": "ml-100k", "strategy": s, "params": {}, "seed": seed,
             "full/hr@10": hr + seed, "pop100/hr@10": pop + seed, "seconds": sec, "epochs_run": epochs}
            for s, hr, pop, sec, epochs in (("infonce", 10.0, 50.0, 1000.0, 50),
                                            ("temperature_free", 11.0, 48.0, 600.0, 20))
            for seed in range(3)]  # fmt: skip


def test_dcrec_cost_comes_from_steps_timed_in_turns_never_from_the_runs_times(tmp_path: Path) -> None:
    runs = _dcrec_rows()
    assert "better; no cost ratio (runs timed under different loads, and no steps timed in turns)" in claims.matrix(
        runs)  # fmt: skip
    stored = {"summary": {"infonce": {"seconds_per_step": 0.4, "ratio": 1.0},
                          "temperature_free": {"seconds_per_step": 0.43, "ratio": 1.05}}}  # fmt: skip
    (tmp_path / "cost.json").write_text(json.dumps(stored))
    cost = claims.load_step_cost(tmp_path / "cost.json")
    assert cost == {"infonce": 1.0, "temperature_free": 1.05}
    assert claims.load_step_cost(tmp_path / "absent.json") == {}
    text = claims.matrix(runs, cost)
    assert "+1.00 [+1.00, +1.00] (n 3) better; cost ×1.05" in text and "cost ×0.60" not in text
    # a strategy the timing lacks gets the reason, not its runs' times
    assert "better; no cost ratio (runs timed under different loads" in claims.matrix(runs, {"infonce": 1.0})


def test_dcrec_has_one_column_per_ranking_protocol() -> None:
    text = claims.matrix(_dcrec_rows())
    header = next(line for line in text.splitlines() if line.startswith("| strategy |"))
    row = next(line for line in text.splitlines() if line.startswith("| temperature_free |"))
    cells = dict(zip(header.split(" | "), row.split(" | "), strict=True))
    full = "DCRec ML-100K (HR@10, full ranking; cost per training step)"
    sampled = next(name for name in cells if "100 popularity-sampled negatives" in name)
    assert cells[full].startswith("+1.00 [+1.00, +1.00] (n 3) better")
    assert cells[sampled].startswith("-2.00 [-2.00, -2.00] (n 3) worse")
    assert "The 2 DCRec columns score the same runs" in text


def test_the_long_tail_line_is_a_difference_of_paired_differences() -> None:
    def row(dataset: str, strategy: str, seed: int, knn: float) -> dict:
        return {**_vision("vision-lt", {}, seed, knn, knn), "dataset": dataset, "strategy": strategy}

    base = {"cifar10_lt": (48.0, 49.0, 50.0), "cifar10": (50.0, 50.0, 51.0)}
    # cosine_schedule − infonce: long tail −1, −2, −3; balanced −4, −4, −5: interaction +3, +2, +2 (mean 7/3)
    mine = {"cifar10_lt": (47.0, 47.0, 47.0), "cifar10": (46.0, 46.0, 46.0)}
    runs = [row(d, "infonce", s, k) for d, ks in base.items() for s, k in enumerate(ks)]
    runs += [row(d, "cosine_schedule", s, k) for d, ks in mine.items() for s, k in enumerate(ks)]
    assert claims.imbalance_lines(runs[:-1]) == []  # 2 paired seeds on the balanced subset: no line
    (line,) = [x for x in claims.imbalance_lines(runs) if x]
    # sd of (3, 2, 2) = 0.57735; t(0.975, 2) 4.302653 / sqrt(3) = 2.484: 2.33 ± 1.43
    assert "`cosine_schedule` +2.33 [+0.90, +3.77] (n 3) higher on the long tail" in line


def test_the_labels_line_pairs_each_labelled_setting_with_the_balanced_baseline() -> None:
    """vision-labels rows are told apart by their parameters and paired by seed with vision-lt's balanced
    ``infonce`` rows (never with the long tail's)."""
    def row(experiment: str, dataset: str, params: dict, seed: int, knn: float) -> dict:
        return {**_vision(experiment, params, seed, knn, knn + 1), "dataset": dataset}

    runs = [row("vision-lt", "cifar10", {}, s, k) for s, k in enumerate((50.0, 51.0, 52.0))]
    runs += [row("vision-lt", "cifar10_lt", {}, s, 0.0) for s in range(3)]
    exclude, supcon = {"label_policy": "exclude"}, {"label_policy": "positives_out"}
    runs += [row("vision-labels", "cifar10", exclude, s, k) for s, k in enumerate((51.0, 52.0, 53.0))]
    runs += [row("vision-labels", "cifar10", supcon, s, k) for s, k in enumerate((60.0, 62.0, 64.0))]
    assert claims.labels_lines(runs[:6]) == []
    (line,) = [x for x in claims.labels_lines(runs) if x]
    assert '`label_policy="exclude"` (two images of a class are no negatives): kNN +1.00 [+1.00, +1.00] (n 3)' in line
    # SupCon − infonce: +10, +11, +12: sd 1, t(0.975, 2) / sqrt(3) = 2.484
    supcon_line = '`label_policy="positives_out"` (supervised contrastive, L_out): kNN +11.00 [+8.52, +13.48] (n 3)'
    assert supcon_line + " better" in line


def test_the_tau_search_summary_follows_the_marks() -> None:
    nd = "no detectable difference"
    assert claims._tau_search_summary({0.1: "better", 0.5: "worse", 1.0: nd}).startswith(
        "it beats τ 0.1 but loses to τ 0.5: it does not replace a tuned τ")
    assert claims._tau_search_summary({0.1: "better", 0.5: nd}).startswith("it never loses to a τ of the sweep")
    assert claims._tau_search_summary({0.1: "worse", 0.5: nd}) == "it loses to τ 0.1 and beats no τ of the sweep"
    assert claims._tau_search_summary({0.1: nd}) == "no detectable difference to any τ of the sweep"


def test_rows_of_a_replaced_setting_leave_the_cells_and_are_reported_apart() -> None:
    def row(strategy: str, params: dict, seed: int, knn: float) -> dict:
        return {**_vision("vision-lt", params, seed, knn, knn), "strategy": strategy}

    current = claims.SETTINGS["vision-lt"]
    (now,) = [p for s, p in current if s == "cosine_schedule"]
    old = {"period": 400, "period_unit": "step"}
    runs = [row("infonce", {}, s, 50.0 + s) for s in range(3)]
    runs += [row("cosine_schedule", now, s, 51.0 + s) for s in range(3)]  # +1 on every seed
    runs += [row("cosine_schedule", old, s, 47.0 + s) for s in range(3)]  # −3 on every seed
    assert claims.is_current(runs[3]) and not claims.is_current(runs[6])
    assert not claims.is_current({**runs[0], "experiment": "retired-experiment"})
    text = claims.matrix(runs)
    (cells,) = [line for line in text.splitlines() if line.startswith("| cosine_schedule |")]
    assert "+1.00 [+1.00, +1.00] (n 3) better" in cells and "-3.00" not in cells
    (earlier,) = [line for line in text.splitlines() if line.startswith("Earlier settings")]
    assert '`cosine_schedule` {"period": 400, "period_unit": "step"} (the loss\'s default period' in earlier
    assert "vision-lt cifar10_lt -3.00 [-3.00, -3.00] (n 3) worse" in earlier
    assert "20 epochs at 100, 40 epochs at 200" in text  # the setting of the cells is stated
    assert claims.earlier_lines([], runs) == []


def _gpu(strategy: str, seed: int, knn: float, linear: float) -> dict:
    from benchmarks.claims_runs import VISION_GPU

    return {"experiment": "vision-gpu", "dataset": "cifar10", "strategy": strategy, "seed": seed, "knn_top1": knn,
            "params": {"epochs": VISION_GPU["epochs"]}, "linear_top1": linear, "seconds": 1000.0 + seed}  # fmt: skip


def test_gpu_rows_pair_the_cifar_claims_by_seed_and_state_the_shortened_budget() -> None:
    from benchmarks.claims_runs import VISION_GPU

    runs = [_gpu("infonce", s, 67.0 + s, 73.0 + s) for s in range(5)]
    runs += [_gpu("dystress", s, 69.5 + s + (0.5 if s == 4 else 0.0), 74.0 + s) for s in range(5)]  # + 2.5 / 2.6
    runs += [_gpu("macl", s, 67.2 + s, 73.1 + s) for s in range(2)]
    rows = {(r.paper, r.claim): r for r in claims.gpu_rows(runs)}
    dys = rows[("DySTreSS", "DySTreSS 85.68 − SimCLR 83.65: +2.03")]
    # differences 2.5, 2.5, 2.5, 2.5, 3.0: mean 2.6, sd sqrt(0.05), t(4) 2.776 -> ± 0.278
    assert dys.number == "+2.60 [+2.32, +2.88] (n 5)"
    assert dys.verdict.startswith(f"reproduced; a {VISION_GPU['epochs']}-epoch gain")
    assert f"**{VISION_GPU['epochs']} of 200 epochs**" in dys.ours
    assert "kNN top-1" in dys.ours and "one seed per session lent a GPU" in dys.ours
    macl = rows[("MACL", "MACL 87.41 − NT-Xent 83.56: +3.85")]  # a linear-probe claim reads the probe
    assert macl.number == "+0.10 [+0.10, +0.10] (n 2)" and macl.verdict.startswith("inconclusive (2 paired seeds")
    assert "linear-probe top-1" in macl.ours and "not Adam 1e-3" in macl.ours
    dual = rows[("Dual temperature", "SimCo 85.61 − MoCo v2 82.35: +3.26")]
    assert (dual.number, dual.verdict) == ("not run yet", "pending")
    # rows of another budget are another setting: never paired with these
    longer = {**_gpu("dual_temperature", 0, 80.0, 80.0), "params": {"epochs": 2 * VISION_GPU["epochs"]}}
    assert not claims.is_current(longer) and all(claims.is_current(r) for r in runs)
    table = claims.claims_table([*runs, longer])
    assert "| SimCo 85.61 − MoCo v2 82.35: +3.26 |" in table and "not run yet | pending |" in table


def test_strategies_trained_side_by_side_on_one_gpu_give_no_cost_ratio() -> None:
    runs = [_gpu(s, seed, 67.0 + seed + (1.0 if s == "macl" else 0.0), 70.0) for s in ("infonce", "macl")
            for seed in range(3)]  # fmt: skip
    assert claims.column(runs, "vision-gpu", "cifar10", "knn_top1")["macl"][1] == "trained side by side"
    text = claims.matrix(runs)
    assert "+1.00 [+1.00, +1.00] (n 3) better; no cost ratio (trained side by side)" in text
    assert "| infonce | 0 1 2 | 68.00 | 70.00 | 1001 |\n| macl | 0 1 2 | 69.00 | 70.00 | 1001 |" in text
    assert "At that budget `infonce` reaches 68.00 kNN top-1 (mean, n 3), against 83.65" in text
    # runs that stopped short are not "still accumulating", and say why they stopped
    note = claims.pending_note(runs)
    assert ("- Runs stopped short of their seeds: the GPU rows: seeds of the least-run setting, of 3 planned: "
            "cifar10 0 (infonce 3, macl 3, dystress 0, ") in note and "no further session was lent one." in note
    assert "GPU" not in next(line for line in note.splitlines() if "still accumulating" in line)


def test_the_gpu_experiment_refuses_a_machine_without_cuda(tmp_path, monkeypatch) -> None:
    import torch

    from benchmarks import claims_runs

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="no CUDA device"):
        claims_runs.vision_gpu("cifar10", "infonce", {"epochs": 30}, 0, tmp_path)


def test_parallel_runs_are_stored_one_at_a_time_as_each_ends_and_failures_do_not_lose_the_others(
    tmp_path, monkeypatch
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from benchmarks import claims_runs

    def experiment(dataset, strategy, params, seed, workdir, resume=False):
        if seed == 1:
            raise ValueError("broken run")
        time.sleep(0.3 if seed == 0 else 0.0)  # seed 2 ends first
        return {"accuracy": 70.0 + seed}

    monkeypatch.setitem(claims_runs.EXPERIMENTS, "graphcl-tu", experiment)
    plans = list(claims_runs.planned("graphcl-tu", ["MUTAG"], [0, 1, 2], ["infonce"]))
    out, work, results = tmp_path / "rows.json", tmp_path / "work", {"rows": []}
    with pytest.raises(SystemExit, match=r"1 of 3 runs failed .*MUTAG infonce \{\} seed 1: ValueError\('broken run'\)"):
        claims_runs.run_all("graphcl-tu", plans, work, out, results, parallel=3, pool=ThreadPoolExecutor(3))
    rows = json.loads(out.read_text())["rows"]
    assert [(r["seed"], r["accuracy"]) for r in rows] == [(2, 72.0), (0, 70.0)]  # in the order they ended
    assert not [f for f in work.iterdir() if "seed1" not in f.name]  # stored runs leave no checkpoints


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the refusal tested needs a machine without CUDA")
def test_parallel_runs_in_child_processes_report_each_refusal(tmp_path) -> None:
    from benchmarks import claims_runs

    plans = list(claims_runs.planned("vision-gpu", ["cifar10"], [0], ["infonce", "macl"]))
    with pytest.raises(SystemExit, match="2 of 2 runs failed .*no CUDA device"):
        claims_runs.run_all("vision-gpu", plans, None, tmp_path / "rows.json", {"rows": []}, parallel=2)
    assert not (tmp_path / "rows.json").exists()


def test_parallel_must_be_positive(monkeypatch, capsys) -> None:
    import sys

    from benchmarks import claims_runs

    monkeypatch.setattr(sys, "argv", ["claims_runs.py", "graphcl-tu", "--parallel", "0"])
    with pytest.raises(SystemExit):
        claims_runs.main()
    assert "--parallel must be >= 1, got 0" in capsys.readouterr().err
