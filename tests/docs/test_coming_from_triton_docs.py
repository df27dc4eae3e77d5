"""docs/coming-from-triton.md lists every tritonserver flag and every config.pbtxt field that
naiad accepts without acting on, so the page cannot fall behind the code."""

from pathlib import Path

from naiad.cli.inert_flags import INERT_FLAGS
from naiad.config.unacted import UNACTED_FIELDS

DOC = (Path(__file__).resolve().parents[2] / "docs" / "coming-from-triton.md").read_text()


def test_every_inert_flag_is_listed():
    assert [spec.flag for spec in INERT_FLAGS if f"`{spec.flag}`" not in DOC] == []


def test_every_unacted_config_field_is_listed():
    assert [field for field, _, _ in UNACTED_FIELDS if f"`{field}`" not in DOC] == []


def test_linked_pages_exist():
    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in (
        "cli.md",
        "install.md",
        "performance.md",
        "backends/python.md",
        "backends/caffe2.md",
        "backends/writing-a-backend.md",
        "http.md",
        "grpc.md",
    ):
        assert f"]({page}" in DOC, page
        assert (docs / page).is_file(), page
