"""An exception that no layer turned into a NaiadError reaches the client as INTERNAL naming
its type; an OS error's own text (which names server paths) stays in the server's log."""

from naiad import ErrorCode, NaiadError


def test_os_error_text_is_left_out():
    error = NaiadError.unexpected(FileNotFoundError(2, "No such file or directory", "/srv/models/secret"))
    assert error.code is ErrorCode.INTERNAL
    assert error.message == "internal error: FileNotFoundError (see the server log)"


def test_other_exceptions_keep_their_message():
    error = NaiadError.unexpected(KeyError("INPUT9"))
    assert error.code is ErrorCode.INTERNAL and error.message == "internal error: KeyError: 'INPUT9'"
