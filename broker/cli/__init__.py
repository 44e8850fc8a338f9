"""The broker's command line (`kafkette.broker.cli.main`): broker, topics and groups, one subcommand per module.

The installed `kafkette` adds the local cluster verbs from `kafkette.operator.cli`. Kept empty so that
importing one subcommand (as `python -m kafkette.broker` does for `broker`) does not load the others and
their client libraries.
"""
