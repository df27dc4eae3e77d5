"""Which store, endpoint and credentials a repository URL and the environment give, and the
errors for URLs and environments that cannot work (the emulator tests serve through each)."""

import pytest

from naiad.errors import NaiadError
from naiad.repository.object_stores import resolve_store

AZURITE_KEY = "a2V5"


@pytest.mark.parametrize(
    ("url", "environ", "endpoint", "root", "credentials"),
    [
        ("s3://bucket/repo", {}, "", "bucket/repo", "the AWS default chain (~/.aws, the instance's role)"),
        (
            "s3://minio.local:9000/bucket/repo",
            {"AWS_ACCESS_KEY_ID": "id"},
            "http://minio.local:9000",
            "bucket/repo",
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        ),
        (
            "s3://https://minio.local:9000/bucket/repo",
            {"AWS_PROFILE": "models"},
            "https://minio.local:9000",
            "bucket/repo",
            "AWS_PROFILE 'models'",
        ),
        (
            "s3://bucket/repo",
            {"AWS_ENDPOINT_URL": "http://h:1"},
            "http://h:1",
            "bucket/repo",
            "the AWS default chain (~/.aws, the instance's role)",
        ),  # fmt: skip
        (
            "gs://bucket/repo",
            {},
            "",
            "bucket/repo",
            "Google's default credentials (gcloud, the attached service account), else anonymous",
        ),
        (
            "gs://bucket/repo",
            {"STORAGE_EMULATOR_HOST": "h:4443"},
            "http://h:4443",
            "bucket/repo",
            "anonymous (emulator endpoint)",
        ),  # fmt: skip
        ("gs://h:4443/bucket/repo/", {}, "http://h:4443", "bucket/repo", "anonymous (emulator endpoint)"),
        (
            "gs://bucket/repo",
            {"GOOGLE_APPLICATION_CREDENTIALS": "key.json", "STORAGE_EMULATOR_HOST": "h:1"},
            "http://h:1",
            "bucket/repo",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ),
        (
            "as://acct/models/repo",
            {"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_KEY": AZURITE_KEY},
            "",
            "models/repo",
            "AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY",
        ),
        (
            "as://h:10000/acct/models/repo",
            {"AZURE_STORAGE_KEY": AZURITE_KEY},
            "http://h:10000/acct",
            "models/repo",
            "AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY",
        ),
        (
            "as://acct/models/repo",
            {"AZURE_STORAGE_CONNECTION_STRING": "AccountName=acct;AccountKey=k;BlobEndpoint=http://h:1/acct"},
            "http://h:1/acct",
            "models/repo",
            "AZURE_STORAGE_CONNECTION_STRING",
        ),
        (
            "as://acct/models/repo",
            {},
            "",
            "models/repo",
            "anonymous (neither AZURE_STORAGE_KEY nor AZURE_STORAGE_CONNECTION_STRING is set)",
        ),
    ],
)
def test_endpoint_root_and_credential_source(url, environ, endpoint, root, credentials):
    access = resolve_store(url, environ)
    assert (access.endpoint, access.root, access.credentials) == (endpoint, root, credentials)


def test_an_emulator_endpoint_gets_the_json_api_client_of_gcsfs():
    """gcsfs's default class asks a gRPC API an emulator lacks first: each call stalled."""
    assert resolve_store("gs://h:1/bucket/repo", {}).filesystem_class == "gcsfs.core.GCSFileSystem"
    assert resolve_store("gs://bucket/repo", {}).filesystem_class == ""


def test_azure_endpoint_in_the_url_becomes_a_connection_string():
    access = resolve_store("as://h:10000/acct/models/repo", {"AZURE_STORAGE_KEY": AZURITE_KEY})
    assert access.options == {
        "account_name": "acct",
        "connection_string": (
            f"DefaultEndpointsProtocol=http;AccountName=acct;AccountKey={AZURITE_KEY};BlobEndpoint=http://h:10000/acct;"
        ),
    }


def test_the_message_names_store_endpoint_and_credentials():
    access = resolve_store("gs://bucket/repo", {"STORAGE_EMULATOR_HOST": "http://h:4443"})
    assert access.describe() == "Google Cloud Storage at http://h:4443, credentials: anonymous (emulator endpoint)"


@pytest.mark.parametrize(
    ("url", "environ", "message"),
    [
        ("ftp://bucket/repo", {}, "model repository 'ftp://bucket/repo' is not an s3://, gs:// or as:// URL"),
        ("gs://", {}, "model repository 'gs://' names no bucket or container"),
        ("as://acct", {}, "model repository 'as://acct' names no container: as://account/container/path"),
        (
            "as://acct/models",
            {"AZURE_STORAGE_ACCOUNT": "other", "AZURE_STORAGE_KEY": AZURITE_KEY},
            "model repository 'as://acct/models' names account 'acct', but AZURE_STORAGE_ACCOUNT is 'other'",
        ),
        (
            "as://acct/models",
            {"AZURE_STORAGE_CONNECTION_STRING": "AccountName=other;AccountKey=k"},
            "model repository 'as://acct/models' names account 'acct', but AZURE_STORAGE_CONNECTION_STRING is for "
            "account 'other'",
        ),
        (
            "as://h:1/acct/models",
            {},
            "model repository 'as://h:1/acct/models' names the endpoint http://h:1: set AZURE_STORAGE_KEY "
            "(and AZURE_STORAGE_ACCOUNT) or AZURE_STORAGE_CONNECTION_STRING",
        ),
    ],
)
def test_urls_and_environments_that_cannot_work_are_named(url, environ, message):
    with pytest.raises(NaiadError) as info:
        resolve_store(url, environ)
    assert info.value.message == message
