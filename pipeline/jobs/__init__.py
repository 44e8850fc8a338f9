"""Example pipelines the operator runs and scales (``python -m kafkette.pipeline.jobs.<name>``)."""
