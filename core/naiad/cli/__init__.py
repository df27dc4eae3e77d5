"""`naiad`, the command: `naiad serve` and the subcommands to come.

`main` dispatches to the modules of `naiad.cli.commands` (one per subcommand, each with its
own flags); `flags` turns options classes into flags and back; `serve_process` is one process
of `naiad serve`; the frontends it runs are the installed `naiad.frontends` entry points.
"""

from .flags import add_option_flags
from .flags import options_from_flags as frontend_options
from .main import build_parser, main
from .serve_process import READY_LINE
from .server_options import load_plugin, options_from_args

__all__ = [
    "READY_LINE",
    "add_option_flags",
    "build_parser",
    "frontend_options",
    "load_plugin",
    "main",
    "options_from_args",
]
