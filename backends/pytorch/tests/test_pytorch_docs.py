"""docs/backends/pytorch.md names every config parameter and --backend-config key the backend reads."""

import re
from pathlib import Path

from naiad_backend_pytorch.settings import PyTorchBackendSettings

from naiad.backend.helpers import setting_keys

SOURCE = Path(__file__).resolve().parents[1] / "src" / "naiad_backend_pytorch"
DOC = Path(__file__).resolve().parents[3] / "docs" / "backends" / "pytorch.md"

KEY_PATTERNS = [
    r'(?:int|bool)_parameter\((?:_key\(config, )?"([^"]+)"',
    r'config\.parameter\("([^"]+)"',
]


def test_every_key_read_by_the_code_is_documented():
    code = "\n".join(path.read_text() for path in SOURCE.glob("*.py"))
    keys = {key for pattern in KEY_PATTERNS for key in re.findall(pattern, code)}
    keys |= set(setting_keys(PyTorchBackendSettings))
    assert {"INFERENCE_MODE", "INTRA_OP_THREAD_COUNT", "default-max-batch-size"} <= keys
    doc = DOC.read_text()
    assert [key for key in sorted(keys) if f"`{key}`" not in doc] == []
