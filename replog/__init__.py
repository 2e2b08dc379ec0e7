"""replog: a Kafka-compatible, replicated log broker."""
