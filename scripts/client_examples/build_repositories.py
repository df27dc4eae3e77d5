"""Builds, under DEST, the model repositories that Triton's Python client examples expect, from
the text models beside this file plus what is generated here (no binaries are committed):

- DEST/models: the eight models of Triton's example repository (the model-control examples
  count exactly eight in its index);
- DEST/more_models: the rest (decoupled repeat, identity, the image ensemble and its steps);
- DEST/images: two small JPEG images for the image clients.

The ONNX classifiers are tiny stand-ins with DenseNet's tensors (data_0 [3, 224, 224] in,
fc6_1 [1000] out): global average pooling then a fixed 1x1 convolution to 1000 classes.

Usage: python build_repositories.py DEST
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

MODELS = Path(__file__).resolve().parent / "models"
TRITON_EXAMPLE_MODELS = (
    "simple",
    "simple_string",
    "simple_int8",
    "simple_identity",
    "simple_sequence",
    "simple_dyna_sequence",
    "simple_string_dyna_sequence",
    "densenet_onnx",
)
CLASSES = 1000


def classifier_onnx(batched: bool) -> bytes:
    """The stand-in classifier; its batch dimension is free when `batched`, else 1."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    batch = "N" if batched else 1
    graph = helper.make_graph(
        [
            helper.make_node("GlobalAveragePool", ["data_0"], ["pooled"]),
            helper.make_node("Conv", ["pooled", "weight", "bias"], ["fc6_1"]),
        ],
        "classifier",
        [helper.make_tensor_value_info("data_0", TensorProto.FLOAT, [batch, 3, 224, 224])],
        [helper.make_tensor_value_info("fc6_1", TensorProto.FLOAT, [batch, CLASSES, 1, 1])],
        [
            numpy_helper.from_array(rng.standard_normal((CLASSES, 3, 1, 1)).astype(np.float32), "weight"),
            numpy_helper.from_array(rng.standard_normal(CLASSES).astype(np.float32), "bias"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # read by every onnxruntime release the backends support
    onnx.checker.check_model(model)
    return model.SerializeToString()


def write_labels(path: Path, stem: str) -> None:
    path.write_text("".join(f"{stem}_{index}\n" for index in range(CLASSES)))


def write_images(directory: Path) -> None:
    from PIL import Image

    directory.mkdir(parents=True, exist_ok=True)
    gradient = np.linspace(0, 255, 256, dtype=np.uint8)
    red = np.stack([np.broadcast_to(gradient, (256, 256))] * 3, axis=-1).copy()
    red[..., 1:] //= 4
    Image.fromarray(red).save(directory / "gradient.jpg", quality=90)
    Image.fromarray(np.full((300, 200, 3), (20, 120, 220), dtype=np.uint8)).save(directory / "blue.jpg")


def build(dest: Path) -> None:
    for repository in ("models", "more_models"):
        shutil.rmtree(dest / repository, ignore_errors=True)
    for source in sorted(MODELS.iterdir()):
        repository = "models" if source.name in TRITON_EXAMPLE_MODELS else "more_models"
        # symlinks=False: a model.py shared by link is copied as a file of its own.
        shutil.copytree(source, dest / repository / source.name, symlinks=False)
    densenet = dest / "models" / "densenet_onnx"
    (densenet / "1").mkdir()
    (densenet / "1" / "model.onnx").write_bytes(classifier_onnx(batched=False))
    write_labels(densenet / "densenet_labels.txt", "densenet_class")
    classifier = dest / "more_models" / "inception_classifier_onnx"
    (classifier / "1").mkdir()
    (classifier / "1" / "model.onnx").write_bytes(classifier_onnx(batched=True))
    ensemble = dest / "more_models" / "preprocess_inception_ensemble"
    (ensemble / "1").mkdir()
    write_labels(ensemble / "inception_labels.txt", "inception_class")
    write_images(dest / "images")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build(Path(sys.argv[1]))
