"""Cluster metadata this broker acts on: topics, partitions, configs, producer ids."""
