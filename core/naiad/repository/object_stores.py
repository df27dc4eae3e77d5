"""Which object store a repository URL names, where its endpoint is and which credentials
reach it: everything needed to open it with fsspec, and the words an error uses to say so.

Credentials come from each store's own environment, as Triton documents them:

- S3 (`s3://bucket/path`): the AWS variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
  AWS_SESSION_TOKEN, AWS_DEFAULT_REGION, AWS_PROFILE) or the AWS default chain.
- GCS (`gs://bucket/path`): GOOGLE_APPLICATION_CREDENTIALS (a JSON key file), else Google's
  default credentials (gcloud, the attached service account), else anonymous.
- Azure (`as://account/container/path`): AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY, or
  AZURE_STORAGE_CONNECTION_STRING.

An emulator or a private cloud is named by `host:port` before the bucket
(`s3://host:port/bucket/path`, or `s3://https://host:port/...` for TLS: Triton's form for S3,
taken for the other two stores as well, since no bucket, container or account name holds a
colon), or by each store's own variable
(AWS_ENDPOINT_URL, STORAGE_EMULATOR_HOST, a connection string's BlobEndpoint).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import NaiadError

__all__ = ["StoreAccess", "resolve_store", "SCHEMES"]

# URL scheme -> (fsspec protocol, the package that provides it, the extra that installs it)
SCHEMES: dict[str, tuple[str, str, str]] = {
    "s3": ("s3", "s3fs", "remote"),
    "gs": ("gcs", "gcsfs", "gcs"),
    "as": ("abfs", "adlfs", "azure"),
}

_STORE_NAMES = {"s3": "S3", "gs": "Google Cloud Storage", "as": "Azure Blob Storage"}


@dataclass(frozen=True, slots=True)
class StoreAccess:
    """How to open one repository URL's store."""

    url: str
    store: str  # "S3", "Google Cloud Storage", "Azure Blob Storage"
    protocol: str  # the fsspec protocol
    package: str  # the Python package fsspec needs for it
    extra: str  # naiad's extra that installs that package
    root: str  # the repository's path inside the store: bucket (container) and prefix
    endpoint: str  # "" for the store's public endpoint
    credentials: str  # where the credentials come from, in words for messages
    options: dict[str, Any] = field(default_factory=dict)  # keyword arguments for fsspec
    # "module.Class" of the fsspec filesystem where the protocol's default must not serve.
    filesystem_class: str = ""

    def describe(self) -> str:
        """The store, its endpoint and the credential source: what a failure message names."""
        where = f" at {self.endpoint}" if self.endpoint else ""
        return f"{self.store}{where}, credentials: {self.credentials}"


def resolve_store(url: str, environ: Mapping[str, str]) -> StoreAccess:
    """The store `url` names, with its endpoint and credentials read from `environ`."""
    scheme, separator, rest = url.partition("://")
    if not separator or scheme not in SCHEMES:
        raise NaiadError.invalid(f"model repository '{url}' is not an s3://, gs:// or as:// URL")
    endpoint, rest = _endpoint_in_url(rest)
    if not rest.strip("/"):
        raise NaiadError.invalid(f"model repository '{url}' names no bucket or container")
    if scheme == "s3":
        return _s3(url, rest, endpoint or environ.get("AWS_ENDPOINT_URL", ""), environ)
    if scheme == "gs":
        return _gcs(url, rest, endpoint or _emulator_host(environ.get("STORAGE_EMULATOR_HOST", "")), environ)
    return _azure(url, rest, endpoint, environ)


def _endpoint_in_url(rest: str) -> tuple[str, str]:
    """`host:port/bucket/path` -> ("http://host:port", "bucket/path"), `https://host:port/...`
    likewise with https (Triton's form for an S3 endpoint over TLS); else ("", rest)."""
    for scheme in ("https", "http"):
        if rest.startswith(f"{scheme}://"):
            host, _, path = rest[len(scheme) + 3 :].partition("/")
            return f"{scheme}://{host}", path
    first, _, path = rest.partition("/")
    if ":" not in first:
        return "", rest
    return f"http://{first}", path


def _emulator_host(value: str) -> str:
    """STORAGE_EMULATOR_HOST is a URL or a bare host:port, as Google's libraries take it."""
    if not value:
        return ""
    return value if "://" in value else f"http://{value}"


def _access(url: str, scheme: str, root: str, endpoint: str, credentials: str, options: dict[str, Any]) -> StoreAccess:
    protocol, package, extra = SCHEMES[scheme]
    return StoreAccess(
        url, _STORE_NAMES[scheme], protocol, package, extra, root.strip("/"), endpoint, credentials, options
    )


def _s3(url: str, rest: str, endpoint: str, environ: Mapping[str, str]) -> StoreAccess:
    options: dict[str, Any] = {}
    if endpoint:
        options["client_kwargs"] = {"endpoint_url": endpoint}
    if environ.get("AWS_ACCESS_KEY_ID"):
        credentials = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    elif environ.get("AWS_PROFILE"):
        credentials = f"AWS_PROFILE '{environ['AWS_PROFILE']}'"
    else:
        credentials = "the AWS default chain (~/.aws, the instance's role)"
    return _access(url, "s3", rest, endpoint, credentials, options)


def _gcs(url: str, rest: str, endpoint: str, environ: Mapping[str, str]) -> StoreAccess:
    options: dict[str, Any] = {}
    key_file = environ.get("GOOGLE_APPLICATION_CREDENTIALS", "")
    if key_file:
        options["token"] = key_file
        credentials = "GOOGLE_APPLICATION_CREDENTIALS"
    elif endpoint:
        # An emulator takes no credentials; looking for Google's default ones first would ask
        # the metadata server of a cloud machine that is not there.
        options["token"] = "anon"
        credentials = "anonymous (emulator endpoint)"
    else:
        credentials = "Google's default credentials (gcloud, the attached service account), else anonymous"
    if not endpoint:
        return _access(url, "gs", rest, endpoint, credentials, options)
    options["endpoint_url"] = endpoint
    # gcsfs's default class (GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT, on unless set to false) asks
    # Google's gRPC API for the bucket's layout first: an emulator or a private endpoint has
    # none, and every call stalled for a minute. The plain JSON-API class is what they speak.
    access = _access(url, "gs", rest, endpoint, credentials, options)
    return replace(access, filesystem_class="gcsfs.core.GCSFileSystem")


def _azure(url: str, rest: str, endpoint: str, environ: Mapping[str, str]) -> StoreAccess:
    account, _, root = rest.partition("/")
    if not root.strip("/"):
        raise NaiadError.invalid(f"model repository '{url}' names no container: as://account/container/path")
    connection_string = environ.get("AZURE_STORAGE_CONNECTION_STRING", "")
    key = environ.get("AZURE_STORAGE_KEY", "")
    options: dict[str, Any] = {"account_name": account}
    if connection_string:
        fields = _connection_string_fields(connection_string)
        named = fields.get("AccountName", "")
        if named and named != account:
            raise NaiadError.invalid(
                f"model repository '{url}' names account '{account}', but AZURE_STORAGE_CONNECTION_STRING "
                f"is for account '{named}'"
            )
        options["connection_string"] = connection_string
        endpoint = endpoint or fields.get("BlobEndpoint", "")
        credentials = "AZURE_STORAGE_CONNECTION_STRING"
    elif key:
        if endpoint:
            # The SDK reaches an emulator (path-style: the account is the first path segment)
            # only through a connection string's BlobEndpoint.
            protocol = endpoint.partition("://")[0]
            options["connection_string"] = (
                f"DefaultEndpointsProtocol={protocol};AccountName={account};AccountKey={key};"
                f"BlobEndpoint={endpoint}/{account};"
            )
            endpoint = f"{endpoint}/{account}"
        else:
            options["account_key"] = key
        credentials = "AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY"
        named = environ.get("AZURE_STORAGE_ACCOUNT", "")
        if named and named != account:
            raise NaiadError.invalid(
                f"model repository '{url}' names account '{account}', but AZURE_STORAGE_ACCOUNT is '{named}'"
            )
    else:
        if endpoint:
            raise NaiadError.invalid(
                f"model repository '{url}' names the endpoint {endpoint}: set AZURE_STORAGE_KEY "
                "(and AZURE_STORAGE_ACCOUNT) or AZURE_STORAGE_CONNECTION_STRING"
            )
        options["anon"] = True
        credentials = "anonymous (neither AZURE_STORAGE_KEY nor AZURE_STORAGE_CONNECTION_STRING is set)"
    return _access(url, "as", root, endpoint, credentials, options)


def _connection_string_fields(text: str) -> dict[str, str]:
    fields = {}
    for part in text.split(";"):
        name, separator, value = part.partition("=")
        if separator:
            fields[name.strip()] = value.strip()
    return fields
