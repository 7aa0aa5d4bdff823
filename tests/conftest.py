"""Tests never reach the network for data: registered datasets that are missing stay missing (the download
tests serve their files from 127.0.0.1 and lift this for themselves).

``--device cuda`` (default: cpu) runs the device tests (``tests/test_device.py``) with their tensors on that
device, compared with float64 references computed on the CPU."""

import os
import sys

import pytest
import torch

os.environ.setdefault("CL_PLUGINS_OFFLINE", "1")
# kernel="triton" on CPU tensors runs under Triton's interpreter, chosen when the kernels are defined (at import), so
# before any test imports cl_plugins; on a GPU (--device cuda) the kernels compile for it instead
if not any(arg.startswith("--device") and "cuda" in arg for arg in sys.argv) and "cuda" not in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--device", default="cpu", help="device of the device tests' tensors (default: cpu)")


@pytest.fixture(scope="session")
def device(request: pytest.FixtureRequest) -> torch.device:
    name = request.config.getoption("--device")
    try:
        dev = torch.device(name)
    except RuntimeError as exc:
        raise pytest.UsageError(f"--device {name!r}: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError(f"--device {name}: this torch sees no CUDA device (torch.cuda.is_available() is False)")
    return dev
