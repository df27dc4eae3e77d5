from pathlib import Path

import pytest
from tf_models import (
    GRAPHDEF_CONFIG,
    InProcessServer,
    build_module,
    save_graphdef,
    save_savedmodel,
    write_model,
)

from naiad import ServerOptions


@pytest.fixture(scope="session")
def module():
    return build_module()


@pytest.fixture(scope="session")
def tf_repo(tmp_path_factory, module) -> Path:
    """The repository every TensorFlow test module serves."""
    repo = tmp_path_factory.mktemp("tf_repo")
    # SavedModel with no config at all: auto-complete fills everything in.
    save_savedmodel(module, write_model(repo, "sm_auto", None) / "model.savedmodel")
    # The same SavedModel, serving the `double` signature by parameter.
    save_savedmodel(
        module,
        write_model(
            repo,
            "sm_double",
            """platform: "tensorflow_savedmodel"
parameters {key: "TF_SIGNATURE_DEF" value {string_value: "double"}}
parameters {key: "TF_NUM_INTRA_THREADS" value {string_value: "1"}}
parameters {key: "TF_NUM_INTER_THREADS" value {string_value: "1"}}
""",
        )
        / "model.savedmodel",
    )
    # max_batch_size 0 with full-rank dims: auto-complete keeps it unbatched.
    save_savedmodel(
        module,
        write_model(
            repo,
            "sm_unbatched",
            """platform: "tensorflow_savedmodel" max_batch_size: 0
input [{name: "x" data_type: TYPE_FP32 dims: [-1, 4]}, {name: "s" data_type: TYPE_STRING dims: [-1]}]
""",
        )
        / "model.savedmodel",
    )
    # max_batch_size 0 written, nothing else: auto-complete fills the tensors, keeps 0.
    save_savedmodel(
        module,
        write_model(repo, "sm_written_zero", 'platform: "tensorflow_savedmodel" max_batch_size: 0')
        / "model.savedmodel",
    )
    # One output listed by name only: auto-complete fills in its type and dims, leaves "upper" out.
    save_savedmodel(
        module,
        write_model(
            repo,
            "sm_partial",
            """backend: "tensorflow" max_batch_size: 2
output [{name: "y"}]
""",
        )
        / "model.savedmodel",
    )
    save_savedmodel(
        module,
        write_model(
            repo,
            "sm_half",
            """platform: "tensorflow_savedmodel"
parameters {key: "TF_SIGNATURE_DEF" value {string_value: "half"}}
""",
        )
        / "model.savedmodel",
    )
    save_savedmodel(
        module,
        write_model(
            repo,
            "sm_parse",
            """platform: "tensorflow_savedmodel"
parameters {key: "TF_SIGNATURE_DEF" value {string_value: "parse"}}
""",
        )
        / "model.savedmodel",
    )
    save_graphdef(module, write_model(repo, "gd_scores", GRAPHDEF_CONFIG) / "model.graphdef")
    # Only `backend: "tensorflow"`: the model.graphdef file makes it a GraphDef model. Two
    # instances sharing one session.
    backend_only = (
        GRAPHDEF_CONFIG.replace('platform: "tensorflow_graphdef"', 'backend: "tensorflow"')
        + """
instance_group [{count: 2, kind: KIND_CPU}]
parameters {key: "MAX_SESSION_SHARE_COUNT" value {string_value: "2"}}
"""
    )
    save_graphdef(module, write_model(repo, "gd_backend_only", backend_only) / "model.graphdef")
    return repo


@pytest.fixture(scope="module")
def served(tf_repo) -> InProcessServer:
    server = InProcessServer(
        ServerOptions([str(tf_repo)], backend_config={"tensorflow": {"intra-op-thread-count": "2"}})
    )
    assert server.server.startup_failures == []
    yield server
    server.close()
