"""Durable storage of a job's home directory, through fsspec URLs (local, s3://, gs://, ...)."""
