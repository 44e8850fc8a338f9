"""The local runtime: a replicated cluster of broker processes on one machine (`kafkette up` and friends).

`plan` holds the pure decisions (port layout, per-broker arguments, the saved state), `probe` asks one
broker for its Metadata over the repository's own protocol code, `runtime` starts and signals processes.
"""
