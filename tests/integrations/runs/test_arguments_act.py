"""Every argument acts or is refused: an argument a layout would ignore, seeds given twice (averaged twice into the
reported mean), a batch with no negative (an untrained model's score reported)."""

from __future__ import annotations

import pytest

import cl_plugins as clp


@pytest.mark.parametrize("layout", ["simclr", "grace", "queue"])
def test_hard_negative_weight_is_refused_where_the_layout_has_no_hard_negatives(layout):
    with pytest.raises(ValueError, match=f"layout='{layout}' has none, so it would do nothing"):
        clp.build_loss("infonce", layout=layout, hard_negative_weight=0.5)
    assert clp.build_loss("infonce", layout="cross_view", hard_negative_weight=0.5).hard_negative_weight == 0.5


def test_grace_refuses_hard_negative_weight_on_its_command_line(data_root, tmp_path, monkeypatch, capsys):
    from cl_plugins.integrations.console import main

    monkeypatch.setenv("CL_PLUGINS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(SystemExit):
        main(["grace", "--loss_arg", "hard_negative_weight=1", "--output_dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert err.count("error: ") == 1 and "hard_negative_weight" in err and "layout='grace'" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("command", "flag", "values"), [("graphcl-tu", "--seeds", ["0", "1", "1"]),
                                                         ("grace", "--seeds", ["0", "0"]),
                                                         ("graphcl-transfer", "--runseeds", ["2", "2"])])  # fmt: skip
def test_a_seed_given_twice_is_refused_in_one_line(tmp_path, capsys, command, flag, values):
    from cl_plugins.integrations.console import main

    with pytest.raises(SystemExit):
        main([command, flag, *values, "--output_dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert err.count("error: ") == 1 and f"{flag} {' '.join(values)}: seed" in err and "given twice" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_a_trainer_refuses_a_reduction_other_than_the_mean(tmp_path, capsys, reduction):
    """--loss_arg reduction=none gave "grad can be implicitly created only for scalar outputs" (a traceback)."""
    from cl_plugins.integrations.console import main

    with pytest.raises(SystemExit):
        main(["graphcl-tu", "--loss_arg", f"reduction={reduction}", "--output_dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert err.count("error: ") == 1 and f"--loss_arg reduction={reduction}: a trainer steps on the batch's mean" in err
    assert not (tmp_path / "out").exists()
