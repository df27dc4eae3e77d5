"""`naiad serve`'s app file argument: optional beside the repository flags, and each way of
leaving out what it needs named."""

import pytest

import naiad
from naiad.cli.main import build_parser, main
from naiad.cli.server_options import options_from_args


def test_the_app_file_is_optional_and_may_stand_anywhere_among_the_flags():
    args = build_parser().parse_args(["serve", "--model-repository", "models", "app.py", "--reload"])
    options = options_from_args(args)
    assert options.app_files == ["app.py"] and options.reload_app_files is True
    assert options.model_repositories == ["models"]
    options = options_from_args(build_parser().parse_args(["serve", "--model-repository", "models"]))
    assert options.app_files == [] and options.reload_app_files is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["serve"],
            "the following arguments are required: --model-repository/--model-store (or an app file: naiad "
            "serve APP.py)",
        ),
        (
            ["--model-repository", "models", "--reload"],
            "--reload: it reloads an app file, and none is given (naiad serve APP.py --reload)",
        ),
    ],
)
def test_what_is_missing_is_named(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith(f"error: {message}")


def test_a_class_without_call_is_refused():
    with pytest.raises(TypeError) as info:

        @naiad.model(inputs={"x": ("FP32", [1])}, outputs={"y": ("FP32", [1])})
        class Setup:
            def setup(self):
                pass

    assert str(info.value) == "@naiad.model 'Setup': the class defines no __call__ to run a batch"
