"""The subcommands of `naiad`, one module each (each defines `COMMAND`, a `naiad.cli.command.Command`)."""
