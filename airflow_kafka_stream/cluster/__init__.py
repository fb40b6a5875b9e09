"""Running jobs on a Spark cluster: the executors\x27 environment, job home naming, submit settings."""
