"""`naiad.backend.helpers.read_settings`: one typed reading of `--backend-config` for every
backend, with one boolean rule, and an error naming the backend, the key and the value for
anything that does not read (never a silent default)."""

from dataclasses import dataclass

import pytest

from naiad.backend import ErrorCode, NaiadError
from naiad.backend.helpers import read_bool, read_settings, setting, setting_keys


@dataclass(frozen=True, slots=True)
class Sample:
    batch: int = setting(4, "default-max-batch-size", "batch auto-complete gives", minimum=0)
    pool: bool = setting(False, "enable-pool", "share one pool")
    fraction: float = setting(0.0, "fraction", "share of memory", minimum=0, maximum=1)
    mode: str = setting("fast", "mode", "how", choices=("fast", "slow"))
    path: str = setting("", "path", "a file")


def test_defaults_blank_values_and_undeclared_keys():
    assert read_settings(Sample, "demo", {}) == Sample()
    assert read_settings(Sample, "demo", {"enable-pool": " ", "backend-directory": "/x"}) == Sample()


def test_values_read_by_their_field_type():
    settings = read_settings(
        Sample,
        "demo",
        {"default-max-batch-size": "16", "enable-pool": "Yes", "fraction": "0.5", "mode": "SLOW", "path": "a;b"},
    )
    assert settings == Sample(batch=16, pool=True, fraction=0.5, mode="slow", path="a;b")


@pytest.mark.parametrize("text", ["true", "TRUE", "1", "yes", "On", " true "])
def test_booleans_true(text):
    assert read_settings(Sample, "demo", {"enable-pool": text}).pool is True


@pytest.mark.parametrize("text", ["false", "False", "0", "no", "OFF"])
def test_booleans_false(text):
    assert read_settings(Sample, "demo", {"enable-pool": text}).pool is False


@pytest.mark.parametrize(
    ("key", "text", "fault"),
    [
        ("enable-pool", "maybe", "expected true or false (1/0, yes/no, on/off)"),
        ("enable-pool", "2", "expected true or false (1/0, yes/no, on/off)"),
        ("default-max-batch-size", "four", "expected an integer"),
        ("default-max-batch-size", "-1", "must be at least 0"),
        ("fraction", "2", "must be at most 1"),
        ("fraction", "half", "expected a number"),
        ("mode", "medium", "expected one of fast, slow"),
    ],
)
def test_a_value_that_does_not_read_is_an_error_naming_key_and_value(key, text, fault):
    with pytest.raises(NaiadError) as info:
        read_settings(Sample, "demo", {key: text})
    assert info.value.code is ErrorCode.INVALID_ARG
    assert info.value.message == f"--backend-config demo,{key}: {fault}, got '{text}'"


def test_keys_in_field_order():
    assert setting_keys(Sample) == ("default-max-batch-size", "enable-pool", "fraction", "mode", "path")


def test_read_bool_names_what_it_reads():
    assert read_bool("on", "TF_USE_PER_SESSION_THREADS") is True
    with pytest.raises(ValueError, match="TF_USE_PER_SESSION_THREADS: expected true or false .* got 'maybe'"):
        read_bool("maybe", "TF_USE_PER_SESSION_THREADS")
