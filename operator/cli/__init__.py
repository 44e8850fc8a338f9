"""The `kafkette` command as installed: the broker's verbs plus the local runtime's (`kafkette.operator.cli.main`).

Cluster verbs (up/status/stop/kill/start/down, demo) drive broker processes through `operator/local`, so
they live here, above the broker: the broker package never imports the operator.
"""
