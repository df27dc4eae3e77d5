"""The environment scripts/setup.sh makes holds torch's CPU-only build (issue 18, item 2):
PyPI's Linux torch is the CUDA build and brings ~3.4 GB of nvidia-* libraries with it."""

import sys
from importlib import metadata
from pathlib import Path

import pytest
from distributions import ROOT

made_by_setup = (ROOT / ".venv" / ".setup-test").is_file() and Path(sys.prefix) == ROOT / ".venv"


@pytest.mark.skipif(not made_by_setup, reason="runs in the .venv scripts/setup.sh made")
def test_torch_is_the_cpu_build():
    assert metadata.version("torch").endswith("+cpu")
    torch = pytest.importorskip("torch")
    assert torch.version.cuda is None
    # No CUDA runtime came in for torch (cuda-python's bindings, which tritonclient and the
    # TensorRT backend ask for, carry no libraries).
    cuda_libraries = [
        d.metadata["Name"]
        for d in metadata.distributions()
        if d.metadata["Name"].lower().startswith(("nvidia-cu", "nvidia-cudnn", "triton"))
        and d.metadata["Name"].lower() != "tritonclient"
    ]
    assert cuda_libraries == []
