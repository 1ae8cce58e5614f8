"""The `ember` command and its subcommands: cli.py parses and dispatches; each command is a module."""
