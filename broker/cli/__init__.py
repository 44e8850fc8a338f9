"""The `kafkette` command line (`kafkette.broker.cli.main`): one subcommand per module.

Kept empty so that importing one subcommand (as `python -m kafkette.broker` does for `broker`)
does not load the others and their client libraries.
"""
