"""Every invalid ensemble is refused at load with a message naming the ensemble, the step
and the tensor; the server keeps serving its other models."""

from __future__ import annotations

import numpy as np
import pytest
from ensemble_repo import add_sub, ensemble, model, serve, step, tensor, unary

from naiad import ErrorCode, InferenceRequest, NaiadError, Tensor


def ident(repo, name="ident", **kw):
    unary(repo, name, "identity", **kw)


def unknown_model(repo):
    ensemble(repo, "e", [tensor("X")], [tensor("Y")], [step("nope", {"INPUT0": "X"}, {"OUTPUT0": "Y"})])


def cycle_between_steps(repo):
    add_sub(repo)
    ident(repo)
    ensemble(
        repo,
        "e",
        [tensor("X")],
        [tensor("Y")],
        [
            step("add_sub", {"INPUT0": "X", "INPUT1": "LOOP"}, {"OUTPUT0": "T", "OUTPUT1": "Y"}),
            step("ident", {"INPUT0": "T"}, {"OUTPUT0": "LOOP"}),
        ],
    )


def cycle_between_ensembles(repo):
    ident(repo)
    ensemble(
        repo,
        "e",
        [tensor("X")],
        [tensor("Y")],
        [step("ident", {"INPUT0": "X"}, {"OUTPUT0": "T"}), step("inner", {"I": "T"}, {"O": "Y"})],
    )
    ensemble(repo, "inner", [tensor("I")], [tensor("O")], [step("e", {"X": "I"}, {"Y": "O"})])


def ensemble_containing_itself(repo):
    ensemble(repo, "e", [tensor("X")], [tensor("Y")], [step("e", {"X": "X"}, {"Y": "Y"})])


def input_not_consumed(repo):
    ident(repo)
    ensemble(
        repo, "e", [tensor("X"), tensor("SPARE")], [tensor("Y")], [step("ident", {"INPUT0": "X"}, {"OUTPUT0": "Y"})]
    )


def output_not_produced(repo):
    ident(repo)
    ensemble(repo, "e", [tensor("X")], [tensor("Y"), tensor("Z")], [step("ident", {"INPUT0": "X"}, {"OUTPUT0": "Y"})])


def datatype_mismatch(repo):
    ident(repo)
    ensemble(repo, "e", [tensor("X", "TYPE_INT32")], [tensor("Y")], [step("ident", {"INPUT0": "X"}, {"OUTPUT0": "Y"})])


def datatype_mismatch_between_steps(repo):
    ident(repo)
    ident(repo, "ints", data_type="TYPE_INT32")
    ensemble(
        repo,
        "e",
        [tensor("X")],
        [tensor("Y", "TYPE_INT32")],
        [step("ident", {"INPUT0": "X"}, {"OUTPUT0": "T"}), step("ints", {"INPUT0": "T"}, {"OUTPUT0": "Y"})],
    )


def shape_mismatch(repo):
    ident(repo)
    ensemble(repo, "e", [tensor("X", dims="[5]")], [tensor("Y")], [step("ident", {"INPUT0": "X"}, {"OUTPUT0": "Y"})])


def step_output_never_used(repo):
    add_sub(repo)
    ensemble(
        repo,
        "e",
        [tensor("A"), tensor("B")],
        [tensor("S")],
        [step("add_sub", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "S", "OUTPUT1": "WASTED"})],
    )


def max_batch_size_too_large(repo):
    ident(repo)
    ensemble(
        repo, "e", [tensor("X")], [tensor("Y")], [step("ident", {"INPUT0": "X"}, {"OUTPUT0": "Y"})], max_batch_size=16
    )


def map_to_missing_input(repo):
    ident(repo)
    ensemble(repo, "e", [tensor("X")], [tensor("Y")], [step("ident", {"INPUT9": "X"}, {"OUTPUT0": "Y"})])


def map_from_missing_output(repo):
    ident(repo)
    ensemble(repo, "e", [tensor("X")], [tensor("Y")], [step("ident", {"INPUT0": "X"}, {"OUTPUT7": "Y"})])


def step_input_not_mapped(repo):
    add_sub(repo)
    ensemble(repo, "e", [tensor("A")], [tensor("S")], [step("add_sub", {"INPUT0": "A"}, {"OUTPUT0": "S"})])


def tensor_produced_twice(repo):
    ident(repo)
    ident(repo, "ident2")
    ensemble(
        repo,
        "e",
        [tensor("X")],
        [tensor("Y")],
        [step("ident", {"INPUT0": "X"}, {"OUTPUT0": "Y"}), step("ident2", {"INPUT0": "X"}, {"OUTPUT0": "Y"})],
    )


def tensor_never_produced(repo):
    add_sub(repo)
    ensemble(
        repo, "e", [tensor("A")], [tensor("S")], [step("add_sub", {"INPUT0": "A", "INPUT1": "GHOST"}, {"OUTPUT0": "S"})]
    )


def mixed_decoupled_lineages(repo):
    add_sub(repo)
    unary(repo, "repeat", "count_up", extra="model_transaction_policy { decoupled: true }\n")
    ensemble(
        repo,
        "e",
        [tensor("X")],
        [tensor("S")],
        [
            step("repeat", {"INPUT0": "X"}, {"OUTPUT0": "R"}),
            step("add_sub", {"INPUT0": "R", "INPUT1": "X"}, {"OUTPUT0": "S"}),
        ],
    )


def step_model_fails_to_load(repo):
    model(repo, "broken", 'backend: "numpy" max_batch_size: 8 input [{name: "INPUT0" data_type: TYPE_FP32 dims: [0]}]')
    ensemble(repo, "e", [tensor("X")], [tensor("Y")], [step("broken", {"INPUT0": "X"}, {"OUTPUT0": "Y"})])


CASES = [
    (
        unknown_model,
        ErrorCode.NOT_FOUND,
        "ensemble 'e', step 0 (model 'nope'): ensemble e contains models that are not available or ambiguous: nope "
        "(unknown model 'nope': no such model in the model repository)",
    ),
    (
        cycle_between_steps,
        ErrorCode.INVALID_ARG,
        # Triton's words: the config alone shows the loop, before any step model is looked up.
        "model 'e': output 'Y' for ensemble 'e' is not written: at least one of its depending tensors, 'T', is not "
        "connected",
    ),
    (
        cycle_between_ensembles,
        ErrorCode.INVALID_ARG,
        "ensemble 'e': circular dependency between ensembles: e -> ... -> inner -> e (its steps lead back to itself "
        "through ensembles: e -> inner -> e",
    ),
    (
        ensemble_containing_itself,
        ErrorCode.INVALID_ARG,
        "ensemble 'e': circular dependency between ensembles: e -> ... -> e -> e (its steps lead back to itself "
        "through ensembles: e -> e",
    ),
    (
        input_not_consumed,
        ErrorCode.INVALID_ARG,
        "model 'e': ensemble input 'SPARE' for ensemble e' is not used",
    ),
    (
        output_not_produced,
        ErrorCode.INVALID_ARG,
        "model 'e': ensemble output 'Z' for ensemble e' is not used",
    ),
    (
        datatype_mismatch,
        ErrorCode.INVALID_ARG,
        "ensemble 'e', step 0 (model 'ident'), tensor 'X': in ensemble e, ensemble tensor X: inconsistent data type: "
        "TYPE_INT32 is inferred from model e while TYPE_FP32 is inferred from model ident",
    ),
    (
        datatype_mismatch_between_steps,
        ErrorCode.INVALID_ARG,
        "ensemble 'e', step 1 (model 'ints'), tensor 'T': in ensemble e, ensemble tensor T: inconsistent data type: "
        "TYPE_FP32 is inferred from model ident while TYPE_INT32 is inferred from model ints",
    ),
    (
        shape_mismatch,
        ErrorCode.INVALID_ARG,
        "ensemble 'e', step 0 (model 'ident'), tensor 'X': in ensemble e, ensemble tensor X: inconsistent shape: "
        "[-1,5] is inferred from model e while [-1,4] is inferred from model ident",
    ),
    (
        step_output_never_used,
        ErrorCode.INVALID_ARG,
        "model 'e': ensemble tensor 'WASTED' is unused in ensemble 'e'",
    ),
    (
        max_batch_size_too_large,
        ErrorCode.INVALID_ARG,
        "ensemble 'e', step 0 (model 'ident'): ensemble e allows maximum batch size 16, but it contains model ident "
        "which only allows maximum batch size to be 8",
    ),
    (
        map_to_missing_input,
        ErrorCode.INVALID_ARG,
        "ensemble 'e', step 0 (model 'ident'), tensor 'X': in ensemble e, ensemble tensor X is mapping to "
        "non-existing input INPUT9 in model ident (its inputs: INPUT0)",
    ),
    (
        map_from_missing_output,
        ErrorCode.INVALID_ARG,
        "ensemble 'e', step 0 (model 'ident'), tensor 'Y': in ensemble e, ensemble tensor Y is mapped from "
        "non-existing output OUTPUT7 in model ident (its outputs: OUTPUT0)",
    ),
    (
        step_input_not_mapped,
        ErrorCode.INVALID_ARG,
        "ensemble 'e', step 0 (model 'add_sub'): in ensemble e, input INPUT1 in model add_sub is not mapped to any "
        "ensemble tensors",
    ),
    (
        tensor_produced_twice,
        ErrorCode.INVALID_ARG,
        "model 'e': ensemble tensor 'Y' can appear in an output map only once for ensemble 'e' step 1",
    ),
    (
        tensor_never_produced,
        ErrorCode.INVALID_ARG,
        "model 'e': output 'S' for ensemble 'e' is not written: at least one of its depending tensors, 'GHOST', is "
        "not connected",
    ),
    (
        mixed_decoupled_lineages,
        ErrorCode.INVALID_ARG,
        "ensemble 'e', step 1 (model 'add_sub'): in ensemble e, step of model 'add_sub' receives inputs originated "
        "from different decoupled models ('X' (the ensemble request), 'R' (decoupled step 0 (model 'repeat'))",
    ),
    (
        step_model_fails_to_load,
        ErrorCode.INVALID_ARG,
        "ensemble 'e': step model 'broken' failed to load: model 'broken': model input 'INPUT0' dimension must be "
        "integer >= 1",
    ),
]


@pytest.mark.parametrize("build, code, message", CASES, ids=[c[0].__name__ for c in CASES])
def test_invalid_ensemble_is_refused_with_its_message(tmp_path, build, code, message):
    build(tmp_path)
    add_sub(tmp_path, "bystander")

    async def body(server):
        await server.load_model("bystander")
        with pytest.raises(NaiadError) as info:
            await server.load_model("e")
        assert message in info.value.message
        assert info.value.code is code
        row = next(r for r in server.repository_index() if r["name"] == "e")
        assert row["state"] == "UNAVAILABLE" and message in row["reason"]
        with pytest.raises(NaiadError) as info:
            await server.infer(InferenceRequest("e", [Tensor.from_numpy("X", np.zeros((1, 4), np.float32))]))
        assert info.value.code is ErrorCode.UNAVAILABLE
        # The server keeps serving what did load.
        a = np.ones((1, 4), np.float32)
        response = await server.infer(
            InferenceRequest("bystander", [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", a)])
        )
        np.testing.assert_array_equal(response.output("OUTPUT0").data, a + a)

    serve(tmp_path, body, model_control_mode="explicit")


def test_invalid_ensemble_at_startup_is_reported_and_others_serve(tmp_path):
    shape_mismatch(tmp_path)

    async def body(server):
        assert len(server.startup_failures) == 1
        assert (
            "ensemble 'e', step 0 (model 'ident'), tensor 'X': in ensemble e, ensemble tensor X: inconsistent shape"
            in (server.startup_failures[0])
        )
        assert server.model_ready("ident") and not server.model_ready("e")

    serve(tmp_path, body)
