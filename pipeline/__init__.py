"""Kafkette's PySpark side: streaming source, sink and example jobs (kafkette.pipeline)."""
