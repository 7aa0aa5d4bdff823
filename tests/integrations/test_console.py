"""The ``cl-plugins`` command and the tracker fallback."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from cl_plugins.integrations.console import commands, main
from cl_plugins.integrations.runs import accelerate_setup

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


#: what a command's help must not import (each takes seconds to load)
HEAVY = ("torch", "numpy", "transformers", "accelerate", "torch_geometric", "sklearn", "scipy", "datasets")


def test_help_of_every_command_imports_nothing_heavy() -> None:
    """``cl-plugins COMMAND --help`` answers from the command's light ``line`` (its run configuration or parser),
    never from the trainer module, whose imports take seconds (10-27 s before)."""
    script = (
        "import json, sys\n"
        "from cl_plugins.integrations.console import commands, main\n"
        "for name in commands():\n"
        "    try:\n"
        "        main([name, '--help'])\n"
        "    except SystemExit as exit_:\n"
        "        assert exit_.code == 0, name\n"
        "sys.stdout = sys.__stdout__\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_light_help_is_the_commands_own(command: str, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The help built without the trainer module equals the one its ``main`` prints."""
    spec = COMMANDS[command]
    if not spec.line:  # its module is light itself: the test above holds it to that
        pytest.skip(f"{command} answers --help from its own module")
    monkeypatch.setattr(sys, "argv", [f"cl-plugins {command}"])
    texts = []
    for run in (lambda: main([command, "--help"]), lambda: importlib.import_module(spec.module).main(["--help"])):
        with pytest.raises(SystemExit):
            run()
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1] and "usage:" in texts[0]


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
