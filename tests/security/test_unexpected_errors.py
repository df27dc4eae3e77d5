"""An exception that no layer turned into a NaiadError reaches the client as INTERNAL naming
its type; an OS error's own text (which names server paths) stays in the server's log."""

from naiad import ErrorCode, NaiadError
from naiad.errors import shown


def test_os_error_text_is_left_out():
    error = NaiadError.unexpected(FileNotFoundError(2, "No such file or directory", "/srv/models/secret"))
    assert error.code is ErrorCode.INTERNAL
    assert error.message == "internal error: FileNotFoundError (see the server log)"


def test_other_exceptions_keep_their_message():
    error = NaiadError.unexpected(KeyError("INPUT9"))
    assert error.code is ErrorCode.INTERNAL and error.message == "internal error: KeyError: 'INPUT9'"


def test_a_clients_value_is_shown_short_and_safe():
    """Error messages show a client's value cut short: a list nested a thousand deep (orjson
    reads up to 1024 levels) made repr() raise RecursionError, and a megabyte-long string
    came back whole (found by tests/security/test_fuzz.py)."""
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    assert shown(deep) == "[[[[...]]]]"
    assert len(shown("x" * 1_000_000)) < 100
    assert shown({"a": 1}) == "{'a': 1}" and shown("abc") == "'abc'" and shown(1.5) == "1.5"
