"""Kafkette's data plane: a broker that speaks the Apache Kafka wire protocol (kafkette.broker)."""
