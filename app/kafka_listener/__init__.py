"""The Kafka listener: unmodified Kafka clients produce to and consume from Quire topics."""
