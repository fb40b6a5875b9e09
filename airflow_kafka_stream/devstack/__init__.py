"""Embedded servers for the demo and the tests: a local Kafka-protocol broker and a local S3."""

#: What the development stacks (the demos, the test fixtures) start for a user listens on loopback only. Spark binds
#: a driver's RPC, block manager and UI (4040) to SPARK_LOCAL_IP, and without it its UI to every interface; a
#: driver launched with this in its environment (or by a process that has it) is reachable from this machine only.
#: Production deployments keep their own settings: nothing in the package sets it.
LOOPBACK_ENV = {"SPARK_LOCAL_IP": "127.0.0.1"}
