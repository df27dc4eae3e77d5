"""`naiad check` where a model's backend is not installed (a CI runner without the
framework): warnings that say what went unchecked, not errors."""

from __future__ import annotations

from checked_repositories import PYTHON_MODEL, write_model

from naiad.models.backend_registry import BackendRegistry
from naiad.repository_check import check_repositories

STEP = """backend: "python"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
ENSEMBLE = """platform: "ensemble"
max_batch_size: 4
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [ { model_name: "step" input_map { key: "INPUT0" value: "IN" } output_map { key: "OUTPUT0" value: "OUT" } } ]
}
"""


def test_a_backend_missing_here_is_a_warning_and_says_what_went_unchecked(tmp_path):
    write_model(tmp_path, "step", {"config.pbtxt": STEP, "1/model.py": PYTHON_MODEL})
    write_model(tmp_path, "pipeline", {"config.pbtxt": ENSEMBLE, "1/": ""})
    report = check_repositories([str(tmp_path)], backends=BackendRegistry(load_entry_points=False))
    assert [(f.severity, f.model, f.file, f.line, f.message, f.fix) for f in report.findings] == [
        (
            "warning",
            "pipeline",
            "pipeline/config.pbtxt",
            6,
            "the wiring of the ensemble was not checked: step model 'step' could not be checked here",
            "install the backend of 'step' where naiad check runs",
        ),
        (
            "warning",
            "step",
            "step/config.pbtxt",
            1,
            "backend 'python' is not installed (installed backends: none); install it with 'pip install "
            "naiad-backend-python'; its model files were not checked",
            "pip install naiad-backend-python where naiad check runs",
        ),
    ]
    assert (report.errors, report.warnings, report.models) == (0, 2, 2)
