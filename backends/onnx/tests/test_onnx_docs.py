"""docs/backends/onnx.md names every config parameter and --backend-config key the backend reads."""

import re
from pathlib import Path

from naiad_backend_onnx.settings import OnnxBackendSettings

from naiad.backend.helpers import setting_keys

SOURCE = Path(__file__).resolve().parents[1] / "src" / "naiad_backend_onnx"
DOC = Path(__file__).resolve().parents[3] / "docs" / "backends" / "onnx.md"

KEY_PATTERNS = [
    r'(?:int|bool)_parameter\("([^"]+)"',
    r'config\.parameter\("([^"]+)"',
]


def test_every_key_read_by_the_code_is_documented():
    code = "\n".join(path.read_text() for path in SOURCE.glob("*.py"))
    keys = {key for pattern in KEY_PATTERNS for key in re.findall(pattern, code)}
    keys |= set(setting_keys(OnnxBackendSettings))
    assert {"intra_op_thread_count", "default-max-batch-size", "enable-global-threadpool"} <= keys
    doc = DOC.read_text()
    assert [key for key in sorted(keys) if f"`{key}`" not in doc] == []
