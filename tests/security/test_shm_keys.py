"""System shared memory through tritonclient: a key names one POSIX shared-memory object,
never a path; offsets and sizes are checked with Triton's words; no OS error text or server
path reaches the client; registration is off unless --allow-client-shm=true."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
import tritonclient.utils.shared_memory as shm
from security_servers import client_module, clients, expect_error

SECRET = b"the server's own file, which no client may read" + bytes(16)


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.bin"
    path.write_bytes(SECRET)
    return path


def _traversal_key(target: Path) -> str:
    """A key that, joined onto /dev/shm, would name `target`."""
    return "/" + "../" * 3 + str(target).lstrip("/")


def test_a_key_that_climbs_out_of_dev_shm_is_refused(shm_server, secret_file):
    key = _traversal_key(secret_file)
    for client in clients(shm_server):
        expect_error(
            lambda: client.register_system_shared_memory("escape", key, 16),
            f"cannot register shared memory region 'escape' - invalid shm key '{key}'",
        )
        # A nested key (a '/' after the leading ones) names no shared-memory object either.
        expect_error(
            lambda: client.register_system_shared_memory("nested", "/a/b", 16),
            "cannot register shared memory region 'nested' - invalid shm key '/a/b'",
        )
        for dots in ("/..", "/.", "..", "//.."):
            expect_error(lambda: client.register_system_shared_memory("dots", dots, 16), f"invalid shm key '{dots}'")
        for slashes in ("/", "///", ""):
            expect_error(
                lambda: client.register_system_shared_memory("slashes", slashes, 16),
                f"cannot register shared memory region 'slashes' - invalid shm key '{slashes}'",
            )
    assert secret_file.read_bytes() == SECRET
    assert clients(shm_server)[0].get_system_shared_memory_status() == []


def test_a_symlink_in_dev_shm_is_not_followed(shm_server, secret_file):
    name = f"naiad-test-link-{uuid.uuid4().hex}"
    link = Path("/dev/shm") / name
    link.symlink_to(secret_file)
    try:
        for client in clients(shm_server):
            message = expect_error(
                lambda: client.register_system_shared_memory("link", "/" + name, 16),
                f"Unable to open shared memory region: '/{name}'",
            )
            assert str(secret_file) not in message and "Errno" not in message and "symbolic" not in message
    finally:
        link.unlink()


def test_reserved_keys_are_refused(shm_server):
    for client in clients(shm_server):
        for prefix in ("triton_python_backend_shm_region_", "naiad-ring-"):
            for key in (f"{prefix}x", f"/{prefix}x", f"///{prefix}x"):
                expect_error(
                    lambda: client.register_system_shared_memory("reserved", key, 16),
                    f"cannot register shared memory region 'reserved' with key '{key}' as the key "
                    f"contains the reserved prefix '{prefix}'",
                )


def test_a_missing_key_names_only_the_key(shm_server):
    key = f"/naiad-test-absent-{uuid.uuid4().hex}"
    for client in clients(shm_server):
        message = expect_error(
            lambda: client.register_system_shared_memory("absent", key, 16),
            f"Unable to open shared memory region: '{key}'",
        )
        assert "No such file" not in message and "/dev/shm" not in message, message


@pytest.fixture
def region():
    key = f"/naiad-test-{uuid.uuid4().hex}"
    handle = shm.create_shared_memory_region("data", key, 64)
    yield key, handle
    shm.destroy_shared_memory_region(handle)


def test_registration_bounds_use_tritons_words(shm_server, region):
    key, _ = region
    for client in clients(shm_server):
        expect_error(
            lambda: client.register_system_shared_memory("too_big", key, 128),
            "failed to register shared memory region 'too_big': invalid args",
        )
        expect_error(
            lambda: client.register_system_shared_memory("past_end", key, 16, offset=56),
            "failed to register shared memory region 'past_end': invalid args",
        )


def test_tensor_offsets_and_sizes_use_tritons_words(shm_server, region):
    key, handle = region
    values = np.arange(16, dtype=np.float32).reshape(1, 16)
    shm.set_shared_memory_region(handle, [values])
    for client in clients(shm_server):
        module = client_module(client)
        client.register_system_shared_memory("data", key, 64)
        try:

            def infer(byte_size: int, offset: int = 0, shape=(1, 16)):
                tensor = module.InferInput("INPUT0", list(shape), "FP32")
                tensor.set_shared_memory("data", byte_size, offset)
                return client.infer("identity", [tensor])

            assert np.array_equal(infer(64).as_numpy("OUTPUT0"), values)
            expect_error(lambda: infer(4, offset=64, shape=(1, 1)), "Invalid offset for shared memory region: 'data'")
            expect_error(lambda: infer(64, offset=4), "Invalid offset + byte size for shared memory region: 'data'")
            expect_error(
                lambda: infer(32),
                "input byte size mismatch for input 'INPUT0' for model 'identity'. Expected 64, got 32",
            )
        finally:
            client.unregister_system_shared_memory("data")


def test_client_shared_memory_is_off_by_default(default_server, region):
    key, _ = region
    disabled = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."
    for client in clients(default_server):
        expect_error(lambda: client.register_system_shared_memory("data", key, 64), disabled)
        expect_error(lambda: client.unregister_system_shared_memory("data"), disabled)
        expect_error(lambda: client.unregister_system_shared_memory(), disabled)
        expect_error(lambda: client.register_cuda_shared_memory("gpu", b"\0" * 64, 0, 64), disabled)
        expect_error(lambda: client.unregister_cuda_shared_memory(), disabled)
    http, grpc = clients(default_server)
    assert http.get_system_shared_memory_status() == []
    assert len(grpc.get_system_shared_memory_status().regions) == 0


def test_the_rings_spill_files_are_reserved():
    from naiad.safe_names import RESERVED_SHM_PREFIXES
    from naiad_wire.interprocess import shm_ring

    assert shm_ring.SEGMENT_PREFIX in RESERVED_SHM_PREFIXES
