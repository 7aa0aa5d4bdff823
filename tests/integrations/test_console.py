"""The ``cl-plugins`` command and the tracker fallback."""

from __future__ import annotations

import importlib

import pytest

from integrations.common import accelerate_setup
from integrations.console import commands, main

COMMANDS = commands()


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    for name in COMMANDS:
        assert name in out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_a_main_and_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert callable(importlib.import_module(COMMANDS[command].module).main)
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0 and "--debug" in capsys.readouterr().out


def test_unknown_command_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simclr-train"])
    assert exit_.value.code == 2 and "invalid choice: 'simclr-train'" in capsys.readouterr().err


def test_data_subcommand_runs(capsys: pytest.CaptureFixture[str]) -> None:
    main(["data", "list"])
    assert "senteval" in capsys.readouterr().out


def test_tracker_falls_back_to_none_without_tensorboard(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setattr(accelerate_setup.importlib.util, "find_spec", lambda name: None)
    assert accelerate_setup.available_tracker("tensorboard") == "none"
    assert "TensorBoard is not installed" in capsys.readouterr().err
    assert accelerate_setup.available_tracker("wandb") == "wandb"
    assert accelerate_setup.available_tracker("none") == "none"


def test_tracker_kept_when_tensorboard_is_installed() -> None:
    pytest.importorskip("tensorboard")
    assert accelerate_setup.available_tracker("tensorboard") == "tensorboard"
