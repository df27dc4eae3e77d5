"""Models that cannot serve fail to load with a message naming what is wrong, and the
server keeps serving the rest."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from tf_models import GRAPHDEF_CONFIG, InProcessServer, write_model

from naiad import NaiadError, ServerOptions

BAD_CONFIGS = {
    # name: (config, model kind, words the load error must contain)
    "wrong_dtype": (
        'platform: "tensorflow_savedmodel" max_batch_size: 4\n'
        'input [{name: "x" data_type: TYPE_INT32 dims: [4]}, {name: "s" data_type: TYPE_STRING dims: [1] reshape {shape: []}}]',
        "sm",
        ["input 'x'", "TYPE_INT32", "DT_FLOAT"],
    ),
    "wrong_input_name": (
        'platform: "tensorflow_savedmodel" max_batch_size: 4\ninput [{name: "image" data_type: TYPE_FP32 dims: [4]}]',
        "sm",
        ["'image'", "signature 'serving_default'", "s, x"],
    ),
    "wrong_dims": (
        'platform: "tensorflow_savedmodel" max_batch_size: 0\n'
        'input [{name: "x" data_type: TYPE_FP32 dims: [2, 5]}, {name: "s" data_type: TYPE_STRING dims: [-1]}]',
        "sm",
        ["tensor 'x'", "the model expects 2 dimensions (shape [-1,4])", "specifies 2 dimensions (shape [2,5])"],
    ),
    "missing_signature": (
        'platform: "tensorflow_savedmodel"\nparameters {key: "TF_SIGNATURE_DEF" value {string_value: "predict"}}',
        "sm",
        ["TF_SIGNATURE_DEF", "'predict'", "'double'", "'serving_default'"],
    ),
    "bad_thread_count": (
        'platform: "tensorflow_savedmodel"\nparameters {key: "TF_NUM_INTRA_THREADS" value {string_value: "many"}}',
        "sm",
        ["TF_NUM_INTRA_THREADS", "'many'"],
    ),
    "graphdef_without_io": ('platform: "tensorflow_graphdef" max_batch_size: 8', "gd", ["GraphDef", "tensor name"]),
    "graphdef_unknown_output": (
        GRAPHDEF_CONFIG.replace('"scores"', '"logits"'),
        "gd",
        ["output 'logits'", "GraphDef has no output"],
    ),
    "graphdef_unfed_placeholder": (
        'platform: "tensorflow_graphdef" max_batch_size: 8\n'
        'input [{name: "x" data_type: TYPE_FP32 dims: [4]}]\noutput [{name: "scores" data_type: TYPE_FP32 dims: [3]}]',
        "gd",
        ["placeholder", "['s']"],
    ),
    "not_a_savedmodel": ('platform: "tensorflow_savedmodel"', "junk", ["model.savedmodel", "saved_model.pb"]),
}


@pytest.fixture(scope="module")
def broken(tmp_path_factory, tf_repo):
    repo = tmp_path_factory.mktemp("tf_broken")
    for name, (config, kind, _) in BAD_CONFIGS.items():
        version = write_model(repo, name, config)
        if kind == "sm":
            shutil.copytree(tf_repo / "sm_auto" / "1" / "model.savedmodel", version / "model.savedmodel")
        elif kind == "gd":
            shutil.copy(tf_repo / "gd_scores" / "1" / "model.graphdef", version / "model.graphdef")
        else:
            (version / "model.savedmodel").mkdir()
    shutil.copytree(tf_repo / "gd_scores", repo / "good")
    server = InProcessServer(ServerOptions([str(repo)], model_control_mode="explicit"))
    yield server
    server.close()


@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_load_error_names_the_fault(broken, name):
    with pytest.raises(NaiadError) as info:
        broken.run(broken.server.load_model(name))
    message = info.value.message
    for words in BAD_CONFIGS[name][2]:
        assert words in message, message
    assert f"'{name}'" in message
    rows = {r["name"]: r for r in broken.server.repository_index()}
    assert rows[name]["state"] == "UNAVAILABLE"


def test_server_keeps_serving_after_failed_loads(broken):
    broken.run(broken.server.load_model("good"))
    x = np.ones((1, 4), np.float32)
    response = broken.infer("good", x=x, s=np.array([[b"a"]], dtype=object))
    assert response.output("scores").data.shape == (1, 3)


def test_backend_config_with_a_bad_value_fails_loads_clearly(tf_repo):
    server = InProcessServer(
        ServerOptions(
            [str(tf_repo)], model_control_mode="explicit", backend_config={"tensorflow": {"gpu-memory-fraction": "2"}}
        )
    )
    try:
        with pytest.raises(NaiadError) as info:
            server.run(server.server.load_model("gd_scores"))
        assert "--backend-config tensorflow,gpu-memory-fraction" in info.value.message
    finally:
        server.close()


def test_without_auto_complete_a_full_config_serves_and_a_missing_one_is_refused(tmp_path, tf_repo, module):
    shutil.copytree(tf_repo / "sm_auto", tmp_path / "no_config")
    shutil.copytree(tf_repo / "sm_auto", tmp_path / "full_config")
    (tmp_path / "full_config" / "config.pbtxt").write_text("""backend: "tensorflow" max_batch_size: 2
input [{name: "x" data_type: TYPE_FP32 dims: [4]}, {name: "s" data_type: TYPE_STRING dims: [1] reshape {shape: []}}]
output [{name: "y" data_type: TYPE_FP32 dims: [3]}]""")
    server = InProcessServer(ServerOptions([str(tmp_path)], model_control_mode="explicit", auto_complete_config=False))
    try:
        with pytest.raises(NaiadError) as info:
            server.run(server.server.load_model("no_config"))
        assert "auto-complete is disabled" in info.value.message
        server.run(server.server.load_model("full_config"))
        assert server.server.model_metadata("full_config")["platform"] == "tensorflow_savedmodel"
        x = np.ones((1, 4), np.float32)
        response = server.infer("full_config", x=x, s=np.array([[b"q"]], dtype=object))
        np.testing.assert_allclose(response.output("y").data, module.serve(x, np.array([b"q"]))["y"].numpy(), rtol=1e-6)
    finally:
        server.close()
