"""`naiad check` on a repository in an object store (a real S3-protocol server on loopback,
moto's server mode): read as `naiad serve` reads it, reported under the URL as given."""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

from naiad.testing import free_port

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")
pytest.importorskip("s3fs")
pytest.importorskip("naiad_backend_python")

from checked_repositories import PYTHON_MODEL, run_check  # noqa: E402


@pytest.fixture
def s3(tmp_path):
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    # Moto keeps its buckets in the test process, across servers: each test starts empty.
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/moto-api/reset", method="POST")).close()
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "TMPDIR": str(tmp_path),  # the local mirror goes under the test's directory
    }
    client = boto3.client(
        "s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id="test", aws_secret_access_key="test"
    )
    client.create_bucket(Bucket="models")
    yield port, client, env
    server.stop()


def test_a_repository_on_s3_is_checked_and_reported_under_its_url(s3):
    port, client, env = s3
    client.put_object(Bucket="models", Key="repo/sound/config.pbtxt", Body=b'backend: "python"\n')
    client.put_object(Bucket="models", Key="repo/sound/1/model.py", Body=PYTHON_MODEL.encode())
    client.put_object(Bucket="models", Key="repo/typo/config.pbtxt", Body=b'backend: "python"\nmax_batch_sise: 2\n')
    client.put_object(Bucket="models", Key="repo/typo/1/model.py", Body=PYTHON_MODEL.encode())
    location = f"s3://127.0.0.1:{port}/models/repo"
    done = run_check("--format", "json", location, env=env)
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert [(f["repository"], f["file"], f["line"], f["fix"]) for f in document["findings"]] == [
        (location, "typo/config.pbtxt", 2, "rename max_batch_sise to max_batch_size")
    ]
    assert document["summary"]["models"] == 2
