"""Embedded servers for the demo and the tests: a local Kafka-protocol broker and a local S3."""
