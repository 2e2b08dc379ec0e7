"""librdkafka's own integration suite run against replog (`make compat`)."""
