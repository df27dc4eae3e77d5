"""Asks a server (Triton or naiad) the questions of the add_sub ensemble comparison and
prints the answers as JSON: `python ask_add_sub_ensembles.py HTTP_PORT GRPC_PORT`.

Run against the real Triton server on tests/ensembles/triton_add_sub_repo, its output
became triton_add_sub_answers.json; test_ensemble_triton_parity.py asks naiad the same."""

import json
import queue
import sys

import numpy as np
import tritonclient.grpc as tg
import tritonclient.http as th

hp, gp = sys.argv[1], sys.argv[2]
a = np.arange(32, dtype=np.float32).reshape(2, 16) * 0.5 - 3.0
b = (np.arange(32, dtype=np.float32).reshape(2, 16)[::-1] * 0.25 + 1.0).copy()
out = {}
c = th.InferenceServerClient(f"127.0.0.1:{hp}")


def inputs(mod, x, y):
    ins = [mod.InferInput("INPUT0", list(x.shape), "FP32"), mod.InferInput("INPUT1", list(y.shape), "FP32")]
    ins[0].set_data_from_numpy(x)
    ins[1].set_data_from_numpy(y)
    return ins


r = c.infer("add_sub_ensemble", inputs(th, a, b))
out["all"] = {n: r.as_numpy(n).tolist() for n in ["SUM", "A_PLUS_2B", "A_AGAIN", "TWO_A", "MINUS_TWO_B"]}
out["all_names"] = sorted(o["name"] for o in r.get_response()["outputs"])
r = c.infer(
    "add_sub_ensemble",
    inputs(th, a[:1], b[:1]),
    outputs=[th.InferRequestedOutput("TWO_A"), th.InferRequestedOutput("SUM")],
)
out["subset"] = {o["name"]: r.as_numpy(o["name"]).tolist() for o in r.get_response()["outputs"]}
out["subset_order"] = [o["name"] for o in r.get_response()["outputs"]]
st = c.get_inference_statistics("add_sub_ensemble")["model_stats"][0]
out["ensemble_stats"] = {k: st[k] for k in ("inference_count", "execution_count")} | {
    "success": st["inference_stats"]["success"]["count"]
}
st = c.get_inference_statistics("add_sub")["model_stats"][0]
out["add_sub_stats"] = {k: st[k] for k in ("inference_count", "execution_count")} | {
    "success": st["inference_stats"]["success"]["count"]
}
try:
    c.infer("add_sub_ensemble", inputs(th, a, b[:, :8].copy()))
except Exception as e:
    out["bad_shape_error"] = str(e)
try:
    c.infer("add_sub_stream", inputs(th, a, b))
except Exception as e:
    out["stream_over_http_error"] = str(e)
out["stream_metadata"] = c.get_model_metadata("add_sub_stream")
# gRPC stream
g = tg.InferenceServerClient(f"127.0.0.1:{gp}")
q = queue.Queue()
g.start_stream(callback=lambda result, error: q.put((result, error)))
g.async_stream_infer("add_sub_stream", inputs(tg, a[:1], b[:1]), request_id="s1", enable_empty_final_response=True)
responses = []
while True:
    result, error = q.get(timeout=30)
    if error is not None:
        responses.append({"error": str(error)})
        break
    resp = result.get_response()
    final = resp.parameters["triton_final_response"].bool_param
    entry = {"id": resp.id, "final": final, "model": resp.model_name, "version": resp.model_version}
    if resp.outputs:
        entry["outputs"] = {o.name: result.as_numpy(o.name).tolist() for o in resp.outputs}
    responses.append(entry)
    if final:
        break
g.stop_stream()
out["stream"] = responses
st = c.get_inference_statistics("add_sub_stream")["model_stats"][0]
out["stream_stats"] = {k: st[k] for k in ("inference_count", "execution_count")} | {
    "success": st["inference_stats"]["success"]["count"]
}
print(json.dumps(out))
