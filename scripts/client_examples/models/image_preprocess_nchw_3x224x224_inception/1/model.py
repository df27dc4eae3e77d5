"""Decodes each encoded image of the batch into RGB 224x224, scaled as Inception expects
(x / 127.5 - 1), channels first."""

import io

import numpy as np
import triton_python_backend_utils as pb_utils
from PIL import Image


def _preprocess(encoded: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(encoded)).convert("RGB").resize((224, 224), Image.BILINEAR)
    scaled = np.asarray(image, dtype=np.float32) / 127.5 - 1
    return scaled.transpose(2, 0, 1)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            images = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().reshape(-1)
            batch = np.stack([_preprocess(bytes(image)) for image in images])
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", batch)]))
        return responses
