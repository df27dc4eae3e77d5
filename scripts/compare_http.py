"""Send the same HTTP requests to two servers serving the same repository and print where
their status codes (and, with --bodies, their bodies) differ.

    python scripts/compare_http.py http://127.0.0.1:8000 http://127.0.0.1:9000 [--bodies]

The requests expect Triton's bench repository (../shared/bench/models): `add_sub` (FP32
[16] inputs INPUT0/INPUT1, outputs OUTPUT0 = sum, OUTPUT1 = difference, max_batch_size 64) and
`identity` (FP32 [-1], no batching), in model control mode "none". Use it to check naiad
against the real Triton server (../shared/bench/triton.sh); start both with
`--allow-client-shm=true` for the shared-memory requests.
"""

from __future__ import annotations

import argparse
import json

import httpx
import numpy as np

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("reference")
parser.add_argument("candidate")
parser.add_argument("--bodies", action="store_true", help="also print both bodies where they differ")
options = parser.parse_args()
clients = [httpx.Client(base_url=url, timeout=30) for url in (options.reference, options.candidate)]
differences = 0


def body_text(response: httpx.Response) -> str:
    try:
        return json.dumps(response.json(), sort_keys=True)
    except ValueError:
        return repr(response.content[:300])


def req(label, method, path, body=None, headers=None, js=None):
    global differences
    if js is not None:
        body = json.dumps(js).encode()
    reference, candidate = (c.request(method, path, content=body, headers=headers or {}) for c in clients)
    same = reference.status_code == candidate.status_code
    print(f"{'same' if same else 'DIFF'}  {reference.status_code} {candidate.status_code}  {label}")
    if not same:
        differences += 1
    if options.bodies and body_text(reference) != body_text(candidate):
        print(f"      reference: {body_text(reference)[:400]}\n      candidate: {body_text(candidate)[:400]}")


a16 = list(range(16))
ones = [1.0] * 16
good = {
    "id": "abc",
    "inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": a16},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "data": ones},
    ],
}
req("server meta", "GET", "/v2")
req("live", "GET", "/v2/health/live")
req("ready", "GET", "/v2/health/ready")
req("model meta", "GET", "/v2/models/add_sub")
req("model meta v1", "GET", "/v2/models/add_sub/versions/1")
req("model meta v2", "GET", "/v2/models/add_sub/versions/2")
req("model meta vx", "GET", "/v2/models/add_sub/versions/x")
req("model meta unknown", "GET", "/v2/models/nosuch")
req("identity meta", "GET", "/v2/models/identity")
req("model ready", "GET", "/v2/models/add_sub/ready")
req("model ready v2", "GET", "/v2/models/add_sub/versions/2/ready")
req("model ready unknown", "GET", "/v2/models/nosuch/ready")
req("config", "GET", "/v2/models/add_sub/config")
req("config identity", "GET", "/v2/models/identity/config")
req("config unknown", "GET", "/v2/models/nosuch/config")
req("stats all", "GET", "/v2/models/stats")
req("stats unknown", "GET", "/v2/models/nosuch/stats")
req("stats v2", "GET", "/v2/models/add_sub/versions/2/stats")
req("index", "POST", "/v2/repository/index")
req("index ready", "POST", "/v2/repository/index", js={"ready": True})
req("index bad json", "POST", "/v2/repository/index", body=b"{nope")
req("infer good", "POST", "/v2/models/add_sub/infer", js=good)
req("infer good v1", "POST", "/v2/models/add_sub/versions/1/infer", js=good)
req(
    "infer nested",
    "POST",
    "/v2/models/add_sub/infer",
    js={
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [a16]},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "data": [ones]},
        ],
        "outputs": [{"name": "OUTPUT1"}],
    },
)
req("infer params", "POST", "/v2/models/add_sub/infer", js={**good, "parameters": {"foo": "bar", "n": 3, "b": True}})
req(
    "infer out params",
    "POST",
    "/v2/models/add_sub/infer",
    js={**good, "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": False}}]},
)
req(
    "infer classification",
    "POST",
    "/v2/models/add_sub/infer",
    js={**good, "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 3}}]},
)
req(
    "infer binary out",
    "POST",
    "/v2/models/add_sub/infer",
    js={**good, "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]},
)
req(
    "infer binary_data_output",
    "POST",
    "/v2/models/add_sub/infer",
    js={**good, "parameters": {"binary_data_output": True}},
)
req("infer unknown model", "POST", "/v2/models/nosuch/infer", js=good)
req("infer unknown version", "POST", "/v2/models/add_sub/versions/3/infer", js=good)
req(
    "infer unknown input",
    "POST",
    "/v2/models/add_sub/infer",
    js={"inputs": good["inputs"] + [{"name": "INPUT9", "shape": [1, 16], "datatype": "FP32", "data": a16}]},
)
req("infer missing input", "POST", "/v2/models/add_sub/infer", js={"inputs": good["inputs"][:1]})
req("infer duplicate input", "POST", "/v2/models/add_sub/infer", js={"inputs": good["inputs"] + good["inputs"][:1]})
req(
    "infer wrong dtype",
    "POST",
    "/v2/models/add_sub/infer",
    js={"inputs": [dict(good["inputs"][0], datatype="INT32"), good["inputs"][1]]},
)
req(
    "infer bad dtype name",
    "POST",
    "/v2/models/add_sub/infer",
    js={"inputs": [dict(good["inputs"][0], datatype="FLOAT"), good["inputs"][1]]},
)
req(
    "infer wrong shape",
    "POST",
    "/v2/models/add_sub/infer",
    js={"inputs": [dict(good["inputs"][0], shape=[2, 8]), dict(good["inputs"][1], shape=[2, 8])]},
)
req(
    "infer wrong rank",
    "POST",
    "/v2/models/add_sub/infer",
    js={"inputs": [dict(good["inputs"][0], shape=[16]), dict(good["inputs"][1], shape=[16])]},
)
big = list(range(16)) * 65
req(
    "infer batch too big",
    "POST",
    "/v2/models/add_sub/infer",
    js={
        "inputs": [
            {"name": "INPUT0", "shape": [65, 16], "datatype": "FP32", "data": big},
            {"name": "INPUT1", "shape": [65, 16], "datatype": "FP32", "data": big},
        ]
    },
)
req(
    "infer data count mismatch",
    "POST",
    "/v2/models/add_sub/infer",
    js={"inputs": [dict(good["inputs"][0], data=a16[:15]), good["inputs"][1]]},
)
req(
    "infer data wrong type",
    "POST",
    "/v2/models/add_sub/infer",
    js={"inputs": [dict(good["inputs"][0], data=["x"] * 16), good["inputs"][1]]},
)
req(
    "infer no data",
    "POST",
    "/v2/models/add_sub/infer",
    js={"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32"}, good["inputs"][1]]},
)
req("infer no inputs field", "POST", "/v2/models/add_sub/infer", js={"id": "x"})
req("infer inputs not list", "POST", "/v2/models/add_sub/infer", js={"inputs": {}})
req(
    "infer input no name",
    "POST",
    "/v2/models/add_sub/infer",
    js={"inputs": [{"shape": [1, 16], "datatype": "FP32", "data": a16}, good["inputs"][1]]},
)
req(
    "infer input no shape",
    "POST",
    "/v2/models/add_sub/infer",
    js={"inputs": [{"name": "INPUT0", "datatype": "FP32", "data": a16}, good["inputs"][1]]},
)
req(
    "infer input no datatype",
    "POST",
    "/v2/models/add_sub/infer",
    js={"inputs": [{"name": "INPUT0", "shape": [1, 16], "data": a16}, good["inputs"][1]]},
)
req("infer malformed json", "POST", "/v2/models/add_sub/infer", body=b'{"inputs": [')
req("infer empty body", "POST", "/v2/models/add_sub/infer", body=b"")
req("infer json not object", "POST", "/v2/models/add_sub/infer", body=b"[1,2]")
req("infer unknown output", "POST", "/v2/models/add_sub/infer", js={**good, "outputs": [{"name": "NOPE"}]})
req("infer id int", "POST", "/v2/models/add_sub/infer", js={**good, "id": 5})
# binary
raw0 = np.arange(16, dtype=np.float32).tobytes()
raw1 = np.ones(16, np.float32).tobytes()
hdr = json.dumps(
    {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": 64}},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": 64}},
        ],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}, {"name": "OUTPUT1"}],
    }
).encode()
req(
    "binary good",
    "POST",
    "/v2/models/add_sub/infer",
    body=hdr + raw0 + raw1,
    headers={"Inference-Header-Content-Length": str(len(hdr))},
)
req(
    "binary short",
    "POST",
    "/v2/models/add_sub/infer",
    body=hdr + raw0 + raw1[:60],
    headers={"Inference-Header-Content-Length": str(len(hdr))},
)
req(
    "binary extra",
    "POST",
    "/v2/models/add_sub/infer",
    body=hdr + raw0 + raw1 + b"xxxx",
    headers={"Inference-Header-Content-Length": str(len(hdr))},
)
req(
    "binary header past body",
    "POST",
    "/v2/models/add_sub/infer",
    body=hdr + raw0 + raw1,
    headers={"Inference-Header-Content-Length": str(len(hdr) + 10000)},
)
req(
    "binary header bad int",
    "POST",
    "/v2/models/add_sub/infer",
    body=hdr + raw0 + raw1,
    headers={"Inference-Header-Content-Length": "abc"},
)
hdr2 = json.dumps(
    {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": 60}},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": 68}},
        ]
    }
).encode()
req(
    "binary size mismatch shape",
    "POST",
    "/v2/models/add_sub/infer",
    body=hdr2 + raw0 + raw1,
    headers={"Inference-Header-Content-Length": str(len(hdr2))},
)
hdr3 = json.dumps(
    {
        "inputs": [
            {
                "name": "INPUT0",
                "shape": [1, 16],
                "datatype": "FP32",
                "parameters": {"binary_data_size": 64},
                "data": a16,
            },
            {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": 64}},
        ]
    }
).encode()
req(
    "binary and data",
    "POST",
    "/v2/models/add_sub/infer",
    body=hdr3 + raw0 + raw1,
    headers={"Inference-Header-Content-Length": str(len(hdr3))},
)
req(
    "identity infer",
    "POST",
    "/v2/models/identity/infer",
    js={"inputs": [{"name": "INPUT0", "shape": [3], "datatype": "FP32", "data": [1, 2, 3]}]},
)
req(
    "identity wrong rank",
    "POST",
    "/v2/models/identity/infer",
    js={"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]},
)
# repository
req("load unknown", "POST", "/v2/repository/models/nosuch/load")
req("load existing (mode none)", "POST", "/v2/repository/models/add_sub/load")
req("unload (mode none)", "POST", "/v2/repository/models/add_sub/unload")
req("load bad json", "POST", "/v2/repository/models/add_sub/load", body=b"{x")
# shm
req("shm status", "GET", "/v2/systemsharedmemory/status")
req("shm status name", "GET", "/v2/systemsharedmemory/region/nosuch/status")
req(
    "shm register nokey",
    "POST",
    "/v2/systemsharedmemory/region/r1/register",
    js={"key": "/nosuch_key_xyz", "offset": 0, "byte_size": 64},
)
req("shm register missing", "POST", "/v2/systemsharedmemory/region/r1/register", js={"offset": 0})
req("shm unregister nosuch", "POST", "/v2/systemsharedmemory/region/nosuch/unregister")
req("shm unregister all", "POST", "/v2/systemsharedmemory/unregister")
req("cuda shm status", "GET", "/v2/cudasharedmemory/status")
req(
    "cuda shm register",
    "POST",
    "/v2/cudasharedmemory/region/c1/register",
    js={"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 64},
)
req("cuda unregister", "POST", "/v2/cudasharedmemory/unregister")
req(
    "infer shm unknown region",
    "POST",
    "/v2/models/add_sub/infer",
    js={
        "inputs": [
            {
                "name": "INPUT0",
                "shape": [1, 16],
                "datatype": "FP32",
                "parameters": {"shared_memory_region": "nope", "shared_memory_byte_size": 64},
            },
            good["inputs"][1],
        ]
    },
)
# misc
req("unknown path", "GET", "/v2/nothing")
req("wrong method infer", "GET", "/v2/models/add_sub/infer")
req("wrong method live", "POST", "/v2/health/live")
req("stats after", "GET", "/v2/models/add_sub/stats")

print(f"{differences} status difference(s)")
