"""What the runtime hands Spark: the source's options and the checkpoint's Hadoop name.

The job's configuration becomes the source's options: the ``kafka_stream`` source's (with the drain handshake
and start-offsets paths in the job home), or those of Spark's own connector (``format("kafka")``), mapped by
``core.spark_kafka_options`` with a fresh start resolved here the way ``kafka_stream`` resolves it. And the job home's fsspec URL and storage options become the name and the
settings Spark's Hadoop file systems use. A component of :class:`~airflow_kafka_stream.runtime.StreamRuntime`:
it reads the generation, checkpoint and start offsets from the shared
:class:`~airflow_kafka_stream.runtime.run_state.RunState` and writes the read placement and the binding file.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable

from airflow_kafka_stream.checkpoint.atomic import exists_file, join, open_fs
from airflow_kafka_stream.checkpoint.initial_offsets import write_initial_offsets
from airflow_kafka_stream.checkpoint.reader import read_started_position
from airflow_kafka_stream.core.checkpoint_log import SOURCES_DIR
from airflow_kafka_stream.core.cluster import hadoop_settings, spark_url
from airflow_kafka_stream.core.kafka_connector import CONNECTOR_ARTIFACT, INSTALL_HINT
from airflow_kafka_stream.core.offsets import parse_offsets_json
from airflow_kafka_stream.core.spark_kafka_options import SPARK_KAFKA_FORMAT, START_OPTIONS, connector_options
from airflow_kafka_stream.errors import InvalidInputError
from airflow_kafka_stream.runtime.config import SOURCE_FORMAT
from airflow_kafka_stream.runtime.run_state import RunState
from airflow_kafka_stream.source.binding import BINDING_OPTION, write_binding
from airflow_kafka_stream.source.source_options import parse_source_options
from airflow_kafka_stream.source.stream_reader import KafkaStreamReader, placement_of
from airflow_kafka_stream.source.subscription import ASSIGN, SUBSCRIBE, SUBSCRIBE_PATTERN

log = logging.getLogger(__name__)


class SourceSetup:
    """The source's options, ``read_stream`` and the checkpoint's location for Spark.

    ``prepare`` and ``generation`` are the runtime's: options for the run need the job taken (a standby's wait
    for its go first).
    """

    def __init__(self, run: RunState, config, home, spark, standby, *,
                 prepare: Callable[[], None], generation: Callable[[], int | None]) -> None:
        self.run = run
        self.config = config
        self.home = home
        self.spark = spark
        self.standby = standby
        self._prepare = prepare
        self._generation = generation

    def source_options(self) -> dict[str, str]:
        """Options for the ``kafka_stream`` source, including the drain handshake path."""
        self._prepare()
        options = self.options_for(self.run.starting_offsets)
        options["drainPath"] = self.home.control_url
        # The checkpoint keeps no record of where a fresh start began; the source writes it here.
        options["startOffsetsPath"] = self.home.generation_start_url(self._generation())
        self._note_read_placement(options)
        return options

    def _note_read_placement(self, options: dict[str, str]) -> None:
        """Say once, in the log and the status, where this run reads its batches and why (readMode)."""
        placement = placement_of(parse_source_options(options)).to_dict()
        if placement != self.run.read_placement:
            self.run.read_placement = placement
            log.info("job %s: %s", self.config.job_name, placement["reason"])

    def options_for(self, starting_offsets: str) -> dict[str, str]:
        options: dict[str, str] = {f"kafka.{k}": str(v) for k, v in self.config.client_config().items()}
        if self.config.topics:
            options["subscribe"] = ",".join(self.config.topics)
        else:
            options["subscribePattern"] = str(self.config.subscribe_pattern)
        options["startingOffsets"] = starting_offsets
        # startingOffsets=group reads the job's own group; source_options may still name another one.
        options["groupId"] = self.config.group_id
        if self.config.max_offsets_per_trigger:
            options["maxOffsetsPerTrigger"] = str(self.config.max_offsets_per_trigger)
        options.update({k: str(v) for k, v in self.config.source_options.items()})
        return options

    def read_stream(self):
        """A streaming DataFrame of the job's topics (Spark Kafka source columns), from the job's source.

        A standby returns it at once, before its go: the job builds its query, the standby rehearses it
        (``run``), and after the go starts that same query. Its options then come from a binding file
        (``source/binding.py``) that the runtime writes before each start.
        """
        if self.config.source_format == SPARK_KAFKA_FORMAT:
            return self._read_with_spark_connector()
        if self.standing_by():
            self.run.defined_in_standby = True
            options = self.options_for(self.config.starting_offsets)
            self.run.binding_file = os.path.join(tempfile.mkdtemp(prefix="stream-binding-"), "binding.json")
            write_binding(self.run.binding_file, options)
            options[BINDING_OPTION] = self.run.binding_file
            return self.spark.readStream.format(SOURCE_FORMAT).options(**options).load()
        return self.spark.readStream.format(SOURCE_FORMAT).options(**self.source_options()).load()

    def _read_with_spark_connector(self):
        """The job's topics through Spark's own connector, started where ``kafka_stream`` would start.

        A standby defines it before its go, when its run's start is not known yet: its options then name no
        start, and a run that needs one (a checkpoint without a batch: a drop-state upgrade) finds it seeded in
        the checkpoint after the go (:meth:`bind_for_run`)."""
        if self.standing_by():
            self.run.defined_in_standby = True
            found = connector_options(self.options_for(self.config.starting_offsets), None, seeded=True)
        else:
            self._prepare()
            options = self.options_for(self.run.starting_offsets)
            found = connector_options(options, self._fresh_start(options))
        # Shown where kafka_stream shows its readMode (status, the job page): which source reads, and where.
        self.run.read_placement = {"mode": "executors", "source": SPARK_KAFKA_FORMAT,
                                   "reason": "Spark's own Kafka connector (format(\"kafka\")) reads every batch in "
                                             "Spark tasks on the executors, a task per Kafka partition"}
        try:
            return self.spark.readStream.format(SPARK_KAFKA_FORMAT).options(**found).load()
        except Exception as exc:
            if "KAFKA_DATA_SOURCE_NOT_ENABLED" in str(exc) or "Failed to find data source" in str(exc):
                raise InvalidInputError(
                    f"the job reads with Spark's Kafka connector (format(\"kafka\")) but this driver has no "
                    f"{CONNECTOR_ARTIFACT} jar: submit with kafka_connector auto or bundled ({INSTALL_HINT}), or "
                    "give the jar in spark.jars", setting="kafka_connector") from None
            raise

    def _fresh_start(self, options: dict[str, str]) -> dict | None:
        """Where a fresh start of the generation begins, resolved as ``kafka_stream`` resolves it and recorded in
        the generation's start file; None when the checkpoint holds a position (Spark resumes from it). A start
        already recorded for the generation stands (a first batch withdrawn by a drain is planned again from it)."""
        position = read_started_position(self.run.checkpoint_location, self.config.storage_options)
        if position is not None and (position.batch_id is not None or position.in_flight_batch_id is not None):
            return None
        return self._generation_start(options)

    def _generation_start(self, options: dict[str, str]) -> dict:
        """Where the generation begins: its recorded start, else resolved now (and recorded) from ``options``."""
        start_url = self.home.generation_start_url(self._generation())
        recorded = (self.home.generation_start(self._generation()) or {}).get("offsets")
        if recorded:
            return recorded
        wanted = {SUBSCRIBE.lower(), SUBSCRIBE_PATTERN.lower(), ASSIGN.lower(), *START_OPTIONS}
        start_options = {k: v for k, v in options.items() if k.lower() in wanted or k.lower().startswith("kafka.")}
        start_options["startOffsetsPath"] = start_url
        return KafkaStreamReader(parse_source_options(start_options)).initialOffset()

    def standing_by(self) -> bool:
        """Whether this driver is a standby that has not taken the job yet."""
        return self.standby is not None and not self.standby.went and not self.run.prepared

    def bind_for_run(self) -> None:
        """Before the query built in standby starts for real: its options for the job's generation (this
        project's source), or its start seeded in the checkpoint (Spark's connector)."""
        if self.run.binding_file is not None:
            write_binding(self.run.binding_file, self.source_options())
        elif self.run.defined_in_standby and self.config.source_format == SPARK_KAFKA_FORMAT:
            self._seed_connector_start()

    def _seed_connector_start(self) -> None:
        """A checkpoint with no committed batch (a new generation) gets the generation's start where Spark's
        connector looks first (its ``sources/0/0``), unless the connector already began it there. Source 0: a
        standby refuses, before it is READY, a query with more than one streaming source that would need this."""
        location, storage = self.run.checkpoint_location, self.config.storage_options
        position = read_started_position(location, storage)
        if position is not None and position.batch_id is not None:
            return  # Spark resumes after the committed batch
        fs, root = open_fs(location, storage)
        if exists_file(fs, join(root, SOURCES_DIR, "0", "0")):
            return
        start = self._generation_start(self.options_for(self.run.starting_offsets))
        write_initial_offsets(location, 0, parse_offsets_json(start), storage)
        log.info("job %s: generation %s starts at %s (seeded in its checkpoint for Spark's connector)",
                 self.config.job_name, self._generation(), start)

    def spark_checkpoint_location(self, location: str | None = None) -> str:
        """The checkpoint's name for Spark's Hadoop file systems, which open it with the job's storage options.

        The job home is named for fsspec (a local path, ``s3://``); Spark needs ``file://`` (a bare path means
        the cluster's default file system) and ``s3a://``, and the same credentials and endpoint.
        """
        self.set_hadoop_settings()
        return spark_url(str(location or self.run.checkpoint_location), self.config.storage_options)

    def set_hadoop_settings(self) -> None:
        """The job home's storage options as the Hadoop settings of Spark's file systems."""
        found = hadoop_settings(self.home.url, self.config.storage_options)
        if found.unmapped:
            log.warning("job %s: storage option(s) %s have no Hadoop counterpart and do not reach Spark; set their "
                        "spark.hadoop.* equivalent in the Spark configuration", self.config.job_name,
                        ", ".join(found.unmapped))
        hadoop = self.spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in found.all.items():
            hadoop.set(key, value)
