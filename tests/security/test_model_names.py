"""Model names and uploaded file names on load, through tritonclient over both protocols:
a name that is blank or could leave the repository is refused with Triton's messages before
anything is written, and an uploaded file stays inside its model directory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from security_servers import clients, expect_error, numpy_server

# Triton's own list (qa/L0_input_validation), all refused on load.
TRAVERSAL_NAMES = [
    "../etc",
    "a/../b",
    "../../etc/passwd",
    "../../../../etc",
    "model/..",
    "..",
    "/etc/passwd",
    "model/subdir",
    "model/",
    " ..",
    ".. ",
]
# What an HTTP path can carry in its one segment.
HTTP_TRAVERSAL_NAMES = ["..", " ..", ".. "]
BLANK_NAMES = ["", " ", "   ", "\t", "\n", "\r", "\f", "\v", " \t \n "]
IDENTITY = {
    "backend": "numpy",
    "max_batch_size": 0,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1, -1]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1, -1]}],
}


@pytest.fixture(scope="module")
def explicit(repository: Path):
    with numpy_server(repository, "--model-control-mode", "explicit") as process:
        yield process
        assert "Traceback" not in process.log(), process.log()


def test_a_name_with_path_traversal_is_refused_and_nothing_is_written(explicit, tmp_path):
    http, grpc = clients(explicit)
    # The audit's attack: a gRPC load whose name climbs out of the upload directory.
    target = tmp_path / "planted"
    escape = "../" * 8 + str(target).lstrip("/")
    expect_error(
        lambda: grpc.load_model(escape, config=json.dumps(IDENTITY), files={"file:1/model.py": b"boom"}),
        f"invalid model name '{escape}', model name must not contain path traversal characters",
    )
    assert not target.exists()
    for name in TRAVERSAL_NAMES:
        expect_error(
            lambda: grpc.load_model(name),
            f"invalid model name '{name}', model name must not contain path traversal characters",
        )
    for name in HTTP_TRAVERSAL_NAMES:
        expect_error(lambda: http.load_model(name), "model name must not contain path traversal characters")


def test_a_blank_name_is_refused(explicit):
    http, grpc = clients(explicit)
    for name in BLANK_NAMES:
        expect_error(lambda: grpc.load_model(name), "Model name cannot be empty. Please enter a valid name to deploy.")
    for name in (" ", " \t"):
        expect_error(lambda: http.load_model(name), "Model name cannot be empty. Please enter a valid name to deploy.")


def test_names_that_only_look_like_traversal_are_ordinary_names(explicit):
    for client in clients(explicit):
        for name in ("...", "..my_model", "model.version1", "my_model.."):
            message = expect_error(lambda: client.load_model(name), f"failed to load '{name}'")
            assert "path traversal" not in message


def test_unload_answers_as_for_any_unknown_model(explicit):
    # Triton checks names on load only: unload never reaches the file system.
    # Like any model it never loaded, Triton answers success, and nothing is touched.
    grpc = clients(explicit)[1]
    for name in TRAVERSAL_NAMES:
        grpc.unload_model(name)
    assert grpc.is_server_live()


@pytest.mark.parametrize(
    "parameter",
    [
        "file:../evil.py",
        "file:1/../../evil.py",
        "file:/tmp/evil.py",
        "file:",
        "file:1//model.py",
        "file:./1/model.py",
        "file:1/model.py\0.txt",
    ],
)
def test_an_uploaded_file_stays_inside_the_model_directory(explicit, parameter):
    for client in clients(explicit):
        expect_error(
            lambda: client.load_model("uploaded", config=json.dumps(IDENTITY), files={parameter: b"x"}),
            f"Invalid file parameter '{parameter}' must stay within model directory",
        )


def test_a_file_where_a_directory_is_needed_names_no_server_path(explicit):
    for client in clients(explicit):
        message = expect_error(
            lambda: client.load_model(
                "uploaded", config=json.dumps(IDENTITY), files={"file:1": b"x", "file:1/model.py": b"y"}
            ),
            "Invalid file parameter 'file:1",
            "directory has been created as a file",
        )
        assert "naiad-uploads" not in message and "Errno" not in message, message


def test_uploaded_files_inside_the_directory_still_load(explicit):
    grpc = clients(explicit)[1]
    grpc.load_model("uploaded", config=json.dumps(IDENTITY), files={"file:1/weights/w.bin": b"\0" * 8})
    tensor = grpcclient.InferInput("INPUT0", [1, 2], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 2), np.float32))
    assert grpc.infer("uploaded", [tensor]).as_numpy("OUTPUT0").tolist() == [[1, 1]]
    grpc.unload_model("uploaded")


def test_a_config_override_cannot_point_outside_the_model_directory(explicit, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0\n")
    escape = "../" * 12 + str(secret).lstrip("/")
    labelled = {**IDENTITY, "output": [{**IDENTITY["output"][0], "label_filename": escape}]}
    for client in clients(explicit):
        expect_error(
            lambda: client.load_model("identity", config=json.dumps(labelled)),
            f"label file path '{escape}' for output 'OUTPUT0' in model 'identity' is outside model directory",
        )
        expect_error(
            lambda: client.load_model("identity", config=json.dumps({**IDENTITY, "default_model_filename": "../x.py"})),
            "default_model_filename: '../x.py' must name a file inside the version directory",
        )
