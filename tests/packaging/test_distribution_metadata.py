"""Every distribution carries what an index page and `pip show` need: a readme, the license
and its text, authors, project URLs and classifiers (issue 18, item 1)."""

import re

import pytest
from distributions import ROOT, distribution_dirs, project_table

DIRS = distribution_dirs()


def test_every_backend_is_a_distribution():
    names = {project_table(d)["name"] for d in DIRS}
    assert {
        "naiad",
        "naiad-wire",
        "naiad-backend-python",
        "naiad-backend-onnx",
        "naiad-backend-pytorch",
        "naiad-backend-tensorflow",
        "naiad-backend-tensorrt",
    } <= names


@pytest.mark.parametrize("directory", DIRS, ids=lambda d: d.name if d != ROOT else "core")
def test_distribution_metadata_is_complete(directory):
    project = project_table(directory)
    readme = directory / project["readme"]
    assert readme.is_file() and project["name"] in readme.read_text()
    assert project["license"] == "Apache-2.0"
    for name in project["license-files"]:
        text = (directory / name).read_text()
        assert "Apache License" in text and "Version 2.0, January 2004" in text
        assert "END OF TERMS AND CONDITIONS" in text
    assert project["authors"] and all(a.get("name") for a in project["authors"])
    assert {"Homepage", "Documentation", "Repository", "Issues"} <= set(project["urls"])
    assert all(url.startswith("https://") for url in project["urls"].values())
    classifiers = project["classifiers"]
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    # PEP 639: a license expression excludes license classifiers (setuptools refuses both).
    assert not any(c.startswith("License :: ") for c in classifiers)


def test_every_distribution_points_to_the_same_project():
    urls = {tuple(sorted(project_table(d)["urls"].items())) for d in DIRS}
    assert len(urls) == 1


def test_install_doc_names_every_distribution():
    doc = (ROOT / "docs" / "install.md").read_text()
    listed = set(re.findall(r"^\| `([\w-]+)` \|", doc, re.M))
    assert listed == {project_table(d)["name"] for d in DIRS}
