"""Send the same gRPC requests to two servers and print where their answers differ.

    python scripts/compare_grpc.py 127.0.0.1:8001 127.0.0.1:9001 [--messages]

Both servers serve a repository with `add_sub` (FP32 [-1, 16] inputs, max_batch_size 64),
`identity` (FP32 [-1]), and optionally `identity_bytes` (BYTES [-1]) and a decoupled `repeat`
(INT32 IN [-1] -> one OUT/IDX response per element), e.g. the real Triton server on
shared/bench/models beside naiad on the same models, both started with
`--allow-client-shm=true` for the shared-memory requests. Each line is a request and its outcome:
OK and the answer, or the status code and message.
"""

import contextlib
import io
import queue
import sys

import grpc
import numpy as np
import tritonclient.grpc as tg
from tritonclient.grpc import service_pb2 as spb
from tritonclient.grpc import service_pb2_grpc as sg
from tritonclient.utils import InferenceServerException


def probe(url):
    c = tg.InferenceServerClient(url)
    stub = sg.GRPCInferenceServiceStub(grpc.insecure_channel(url))

    def show(label, fn):
        try:
            r = fn()
            if hasattr(r, "ListFields"):
                r = str(r).replace("\n", " ")[:400]
            print(f"{label}: OK {r}")
        except InferenceServerException as e:
            print(f"{label}: {e.status()} | {e.message()}")
        except grpc.RpcError as e:
            print(f"{label}: {e.code()} | {e.details()}")

    def ins(shape0=(1, 16), shape1=(1, 16), dt0="FP32", dt1="FP32"):
        a = tg.InferInput("INPUT0", list(shape0), dt0)
        a.set_data_from_numpy(np.ones(shape0, np.float32 if dt0 == "FP32" else np.int32))
        b = tg.InferInput("INPUT1", list(shape1), dt1)
        b.set_data_from_numpy(np.ones(shape1, np.float32 if dt1 == "FP32" else np.int32))
        return [a, b]

    show("live", lambda: c.is_server_live())
    show("ready", lambda: c.is_server_ready())
    show("model_ready add_sub", lambda: c.is_model_ready("add_sub"))
    show("model_ready nope", lambda: c.is_model_ready("nope"))
    show("model_ready add_sub v7", lambda: c.is_model_ready("add_sub", "7"))
    show("model_ready add_sub vX", lambda: c.is_model_ready("add_sub", "x"))
    show("server_metadata", lambda: c.get_server_metadata())
    show("model_metadata", lambda: c.get_model_metadata("add_sub"))
    show("model_metadata nope", lambda: c.get_model_metadata("nope"))
    show("model_metadata v7", lambda: c.get_model_metadata("add_sub", "7"))
    show("model_metadata vX", lambda: c.get_model_metadata("add_sub", "x"))
    show("model_config nope", lambda: c.get_model_config("nope"))
    show("model_config v7", lambda: c.get_model_config("add_sub", "7"))
    show("stats nope", lambda: c.get_inference_statistics("nope"))
    show("stats v7", lambda: c.get_inference_statistics("add_sub", "7"))
    show("index", lambda: c.get_model_repository_index())
    show("infer ok", lambda: c.infer("add_sub", ins()).get_response())
    show("infer unknown model", lambda: c.infer("nope", ins()))
    show("infer unknown version", lambda: c.infer("add_sub", ins(), model_version="7"))
    show("infer bad version", lambda: c.infer("add_sub", ins(), model_version="x"))

    def unknown_input():
        x = ins()
        x[1] = tg.InferInput("INPUTX", [1, 16], "FP32")
        x[1].set_data_from_numpy(np.ones((1, 16), np.float32))
        return x

    show("infer unknown input", lambda: c.infer("add_sub", unknown_input()))
    show("infer missing input", lambda: c.infer("add_sub", ins()[:1]))
    show("infer duplicate input", lambda: c.infer("add_sub", ins()[:1] + ins()[:1]))
    show("infer wrong datatype", lambda: c.infer("add_sub", ins(dt1="INT32")))
    show("infer wrong shape", lambda: c.infer("add_sub", ins((1, 8), (1, 8))))
    show("infer wrong rank", lambda: c.infer("add_sub", ins((16,), (16,))))
    show("infer batch over max", lambda: c.infer("add_sub", ins((65, 16), (65, 16))))
    show("infer unknown output", lambda: c.infer("add_sub", ins(), outputs=[tg.InferRequestedOutput("NOPE")]))

    def raw(mutate):
        req = spb.ModelInferRequest(model_name="add_sub")
        for n in ("INPUT0", "INPUT1"):
            req.inputs.add(name=n, datatype="FP32", shape=[1, 16])
            req.raw_input_contents.append(np.ones((1, 16), np.float32).tobytes())
        mutate(req)
        return stub.ModelInfer(req)

    show("raw byte size mismatch", lambda: raw(lambda r: r.raw_input_contents.__setitem__(1, b"\0" * 60)))
    show("raw too few raw contents", lambda: raw(lambda r: r.raw_input_contents.pop()))
    show("raw too many raw contents", lambda: raw(lambda r: r.raw_input_contents.append(b"\0" * 64)))

    def typed(r):
        del r.raw_input_contents[:]
        for t in r.inputs:
            t.contents.fp32_contents.extend([1.0] * 16)

    show("typed ok", lambda: raw(typed))

    def typed_short(r):
        typed(r)
        r.inputs[1].contents.fp32_contents.pop()

    show("typed short", lambda: raw(typed_short))

    def typed_mixed(r):
        r.inputs[0].contents.fp32_contents.extend([1.0] * 16)

    show("typed+raw mixed", lambda: raw(typed_mixed))

    def typed_wrongfield(r):
        del r.raw_input_contents[:]
        for t in r.inputs:
            t.contents.int_contents.extend([1] * 16)

    show("typed wrong field", lambda: raw(typed_wrongfield))
    show("bad datatype", lambda: raw(lambda r: setattr(r.inputs[0], "datatype", "FLOAT")))
    show("negative shape", lambda: raw(lambda r: r.inputs[0].shape.__setitem__(1, -16)))
    show("empty model name", lambda: raw(lambda r: setattr(r, "model_name", "")))
    show(
        "param bad priority",
        lambda: raw(
            lambda r: (
                r.parameters["priority"].string_param.__add__("")
                or r.parameters["priority"].CopyFrom(spb.InferParameter(string_param="high"))
            )
        ),
    )
    show(
        "param timeout string",
        lambda: raw(lambda r: r.parameters["timeout"].CopyFrom(spb.InferParameter(string_param="x"))),
    )
    show("id echo", lambda: raw(lambda r: setattr(r, "id", "abc")))

    # bytes
    def bytes_ok():
        x = tg.InferInput("INPUT0", [3], "BYTES")
        x.set_data_from_numpy(np.array([b"a", b"", b"xyz"], dtype=object))
        r = c.infer("identity_bytes", [x])
        return r.as_numpy("OUTPUT0"), r.get_response()

    show("bytes ok", bytes_ok)

    def bytes_bad():
        req = spb.ModelInferRequest(model_name="identity_bytes")
        req.inputs.add(name="INPUT0", datatype="BYTES", shape=[2])
        req.raw_input_contents.append(b"\x05\0\0\0ab")
        return stub.ModelInfer(req)

    show("bytes truncated", bytes_bad)

    def bytes_typed():
        req = spb.ModelInferRequest(model_name="identity_bytes")
        t = req.inputs.add(name="INPUT0", datatype="BYTES", shape=[2])
        t.contents.bytes_contents.extend([b"a", b"bc"])
        return stub.ModelInfer(req)

    show("bytes typed", bytes_typed)

    # identity with fp32 typed to see output encoding
    def ident_typed():
        req = spb.ModelInferRequest(model_name="identity")
        t = req.inputs.add(name="INPUT0", datatype="FP32", shape=[3])
        t.contents.fp32_contents.extend([1, 2, 3])
        return stub.ModelInfer(req)

    show("identity typed -> raw out?", ident_typed)
    show(
        "identity zero elems",
        lambda: c.infer(
            "identity",
            [
                (lambda i: (i.set_data_from_numpy(np.zeros((0,), np.float32)), i)[1])(
                    tg.InferInput("INPUT0", [0], "FP32")
                )
            ],
        ).get_response(),
    )

    # stream
    def stream(model, reqs, empty_final=False):
        q = queue.Queue()
        s = tg.InferenceServerClient(url)
        s.start_stream(callback=lambda result, error: q.put((result, error)))
        for inputs, kw in reqs:
            s.async_stream_infer(model, inputs, enable_empty_final_response=empty_final, **kw)
        s.stop_stream()
        out = []
        while not q.empty():
            r, e = q.get()
            if e is not None:
                out.append(("ERR", str(e)))
            else:
                resp = r.get_response()
                params = {k: str(v).strip() for k, v in resp.parameters.items()}
                out.append(
                    (
                        resp.id,
                        [o.name for o in resp.outputs],
                        [r.as_numpy(o.name).tolist() for o in resp.outputs],
                        params,
                    )
                )
        return out

    def rep(vals):
        x = tg.InferInput("IN", [len(vals)], "INT32")
        x.set_data_from_numpy(np.array(vals, np.int32))
        return [x]

    show(
        "stream add_sub",
        lambda: stream("add_sub", [(ins(), {"request_id": "1"}), (ins((1, 8), (1, 8)), {"request_id": "2"})]),
    )
    show("stream add_sub empty_final", lambda: stream("add_sub", [(ins(), {"request_id": "1"})], True))
    show("stream unknown model", lambda: stream("nope", [(ins(), {"request_id": "9"})]))
    show("stream repeat", lambda: stream("repeat", [(rep([4, 5, 6]), {"request_id": "r"})]))
    show("stream repeat empty_final", lambda: stream("repeat", [(rep([4, 5]), {"request_id": "r"})], True))
    show("stream repeat zero empty_final", lambda: stream("repeat", [(rep([]), {"request_id": "z"})], True))
    show("stream repeat zero", lambda: stream("repeat", [(rep([]), {"request_id": "z"})]))
    show("stream repeat bad", lambda: stream("repeat", [(ins(), {"request_id": "b"})], True))
    show("infer decoupled", lambda: c.infer("repeat", rep([1])))
    show("infer decoupled 2", lambda: c.infer("repeat", rep([1, 2])))
    show("shm status", lambda: c.get_system_shared_memory_status())
    show("shm status nope", lambda: c.get_system_shared_memory_status("nope"))
    show("shm register bad key", lambda: c.register_system_shared_memory("r", "/no_such_key_x", 64))
    show("shm unregister nope", lambda: c.unregister_system_shared_memory("nope"))
    show("cuda status", lambda: c.get_cuda_shared_memory_status())
    show("cuda register", lambda: c.register_cuda_shared_memory("r", b"eHg=", 0, 64))
    show("cuda unregister", lambda: c.unregister_cuda_shared_memory("r"))
    show("trace", lambda: c.get_trace_settings())
    show("trace model", lambda: c.get_trace_settings(model_name="add_sub"))
    show("log", lambda: c.get_log_settings())
    show("load nope", lambda: c.load_model("nope"))
    show("unload nope", lambda: c.unload_model("nope"))
    show("load bad config", lambda: c.load_model("identity", config="{not json"))
    # shm end-to-end with identity
    import tritonclient.utils.shared_memory as shm

    def shm_e2e():
        h = shm.create_shared_memory_region("probe_in", "/probe_in", 64)
        o = shm.create_shared_memory_region("probe_out", "/probe_out", 64)
        try:
            shm.set_shared_memory_region(h, [np.arange(4, dtype=np.float32)])
            c.register_system_shared_memory("probe_in", "/probe_in", 64)
            c.register_system_shared_memory("probe_out", "/probe_out", 64)
            print("   status:", str(c.get_system_shared_memory_status()).replace("\n", " "))
            x = tg.InferInput("INPUT0", [4], "FP32")
            x.set_shared_memory("probe_in", 16)
            y = tg.InferRequestedOutput("OUTPUT0")
            y.set_shared_memory("probe_out", 16)
            r = c.infer("identity", [x], outputs=[y])
            print("   resp:", str(r.get_response()).replace("\n", " "))
            print("   out:", shm.get_contents_as_numpy(o, np.float32, [4]))
            y2 = tg.InferRequestedOutput("OUTPUT0")
            y2.set_shared_memory("probe_out", 8)
            show("   shm output too small", lambda: c.infer("identity", [x], outputs=[y2]))
            x2 = tg.InferInput("INPUT0", [4], "FP32")
            x2.set_shared_memory("probe_in", 16, offset=60)
            show("   shm input out of range", lambda: c.infer("identity", [x2]))
            x3 = tg.InferInput("INPUT0", [4], "FP32")
            x3.set_shared_memory("nope", 16)
            show("   shm input unknown region", lambda: c.infer("identity", [x3]))
            show("   shm register dup", lambda: c.register_system_shared_memory("probe_in", "/probe_in", 64))
            return "done"
        finally:
            c.unregister_system_shared_memory()
            shm.destroy_shared_memory_region(h)
            shm.destroy_shared_memory_region(o)

    show("shm e2e", shm_e2e)


def outcomes(url):
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        probe(url)
    return buffer.getvalue().splitlines()


def status(line):
    """`label: OK ...` or `label: StatusCode.X | message` -> (label, OK or StatusCode.X)."""
    label, _, rest = line.partition(": ")
    return label, rest.split(" ", 1)[0]


def main():
    """Lines whose status differs; with --messages, lines whose answer differs at all."""
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    first, second = args[0], args[1]
    key = (lambda line: line) if "--messages" in sys.argv else status
    a, b = outcomes(first), outcomes(second)
    differ = 0
    for left, right in zip(a, b):
        if key(left) != key(right):
            differ += 1
            print(f"- {first}: {left[:400]}\n+ {second}: {right[:400]}\n")
    print(f"{len(a)} requests, {differ} answered differently")


if __name__ == "__main__":
    main()
