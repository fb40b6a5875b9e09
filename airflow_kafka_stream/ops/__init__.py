"""Control-plane operations (stop, savepoint, restore, reset, verify, inspect).

Each operation is used the same way by the CLI and by the Airflow layer: it
observes (reads the job home, the checkpoint, Kafka), decides (pure logic in
core/), and acts under the job's lock, recording itself in the job's history.
"""
