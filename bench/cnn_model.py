"""The small CNN of the benchmarks and of `naiad tune`'s tests, built at run time with torch:
four 3x3 convolutions with stride 2 and ReLU, global average pooling and a linear layer to 10
classes, taking one FP32 NCHW image of [3, 96, 96]; exported to ONNX (dynamic batch axis) and to
TorchScript, with the config.pbtxt that serves it (`max_batch_size: 64`, dynamic batching, one
CPU instance).

bench/cnn_bench.py measures servers with it; bench/tune_vs_sweep.py and tests/tune tune it. One
builder, imported by each (the bench scripts run with bench/ on sys.path; the tests put it there).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

IMAGE = (3, 96, 96)
CLASSES = 10
MAX_BATCH = 64
INPUT, OUTPUT = "INPUT__0", "OUTPUT__0"
# The four convolutions' output channels: ~0.3 ms per image at batch 1 on one core here
# (bench/cnn_bench.py's docstring says why the widths are multiples of 16).
DEFAULT_CHANNELS = (16, 48, 96, 192)


def build_network(widths: list[int]) -> Any:
    import torch
    from torch import nn

    torch.manual_seed(0)
    channels = [IMAGE[0], *widths]
    layers: list[nn.Module] = []
    for cin, cout in zip(channels, channels[1:]):
        layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1), nn.ReLU()]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels[-1], CLASSES)]
    return nn.Sequential(*layers).eval()


def export_onnx(network: Any, path: Path) -> None:
    import torch

    # The TorchScript-based exporter (dynamo=False): the torch.export-based default needs
    # onnxscript, which the checkout's venv does not have. Its deprecation warning is expected.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            network,
            (torch.zeros(1, *IMAGE),),
            str(path),
            input_names=[INPUT],
            output_names=[OUTPUT],
            dynamic_axes={INPUT: {0: "batch"}, OUTPUT: {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )


def export_torchscript(network: Any, path: Path) -> None:
    import torch

    with torch.no_grad():
        torch.jit.trace(network, torch.zeros(1, *IMAGE)).save(str(path))  # type: ignore[no-untyped-call]


def build_model(directory: Path, widths: list[int]) -> tuple[Path, Path]:
    network = build_network(widths)
    onnx_path, torch_path = directory / "model.onnx", directory / "model.pt"
    export_onnx(network, onnx_path)
    export_torchscript(network, torch_path)
    return onnx_path, torch_path


def dynamic_batching(queue_delay_us: int = 0) -> str:
    """`dynamic_batching { }` (no queue delay: the config the benchmarks' goals are set for), or
    with `max_queue_delay_microseconds`."""
    delay = f"max_queue_delay_microseconds: {queue_delay_us} " if queue_delay_us else ""
    return f"dynamic_batching {{ {delay}}}"


def model_config(name: str, kind: str, queue_delay_us: int = 0) -> str:
    dims = ", ".join(str(d) for d in IMAGE)
    return f"""name: "{name}"
{kind}
max_batch_size: {MAX_BATCH}
input [ {{ name: "{INPUT}" data_type: TYPE_FP32 dims: [ {dims} ] }} ]
output [ {{ name: "{OUTPUT}" data_type: TYPE_FP32 dims: [ {CLASSES} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
{dynamic_batching(queue_delay_us)}
"""
