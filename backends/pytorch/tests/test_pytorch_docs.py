"""docs/backends/pytorch.md names every config parameter and --backend-config key the backend reads."""

import re
from pathlib import Path

from naiad_backend_pytorch.settings import PyTorchBackendSettings

from naiad.backend.helpers import setting_keys

SOURCE = Path(__file__).resolve().parents[1] / "src" / "naiad_backend_pytorch"
DOC = Path(__file__).resolve().parents[3] / "docs" / "backends" / "pytorch.md"

KEY_PATTERNS = [
    r'parameter_key\(config, "([^"]+)"',
    r'_optional_bool\(config, "([^"]+)"',
    r'(?m)^\s+"([A-Z_]+)": torch\._C\.',  # execution.py's TorchScript switches
    r'config\.parameter\("([^"]+)"',
]


def test_every_key_read_by_the_code_is_documented():
    code = "\n".join(path.read_text() for path in SOURCE.glob("*.py"))
    keys = {key for pattern in KEY_PATTERNS for key in re.findall(pattern, code)}
    keys |= set(setting_keys(PyTorchBackendSettings))
    assert {"INFERENCE_MODE", "INTRA_OP_THREAD_COUNT", "ENABLE_JIT_PROFILING", "default-max-batch-size"} <= keys
    doc = DOC.read_text()
    assert [key for key in sorted(keys) if f"`{key}`" not in doc] == []
