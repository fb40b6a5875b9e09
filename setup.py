"""Packaging for airflow-kafka-stream. Exact versions live in constraints.txt."""

from setuptools import Extension, find_packages, setup

# The kafka_stream source's hot loop in C (Kafka partition -> Arrow buffers), bound to the
# librdkafka inside the confluent-kafka wheel at run time. Optional: without a C compiler the
# package still installs, and the source reads through confluent-kafka in Python instead.
KAFKA_ARROW = Extension(
    "airflow_kafka_stream.source._kafka_arrow",
    sources=["airflow_kafka_stream/source/_kafka_arrow.c"],
    extra_compile_args=["-O2", "-Wall"],
    optional=True,
)

setup(
    name="airflow-kafka-stream",
    version="0.1.0",
    description=(
        "Flink-grade operations (savepoints, offset resets, verification, graceful stop) "
        "for Spark Structured Streaming jobs that read Kafka, driven from Apache Airflow."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["airflow_kafka_stream", "airflow_kafka_stream.*"]),
    include_package_data=True,
    package_data={"airflow_kafka_stream.monitoring": ["alerts.yml", "dashboard.json"]},
    ext_modules=[KAFKA_ARROW],
    install_requires=[
        "apache-airflow>=3.3",
        "apache-airflow-providers-apache-spark>=6.3",
        "apache-airflow-providers-apache-kafka>=2.1",
        "pyspark>=4.2",
        "pyspark-client>=4.2",
        "confluent-kafka>=2.16",
        "pendulum>=3.0",
        "pyarrow>=15",
        "pandas<3",
        "fsspec>=2024.1",
        # Driver metrics (docs/metrics.md): the OpenTelemetry SDK Airflow installs, its OTLP exporters, and the
        # Prometheus exporter for a scrape endpoint on the driver.
        "opentelemetry-sdk>=1.45",
        "opentelemetry-exporter-otlp>=1.45",
        "opentelemetry-exporter-prometheus>=0.66b2",
        "prometheus-client>=0.20",
        # Lineage (docs/lineage.md): Airflow's OpenLineage provider for the tasks' facets, and its client, which the
        # driver emits its streaming run's events with.
        "apache-airflow-providers-openlineage>=2.20",
        "openlineage-python>=1.54",
    ],
    extras_require={
        "s3": ["s3fs"],
        "dev": ["pytest", "pytest-timeout", "pytest-xdist", "ruff", "moto[server]", "s3fs", "playwright"],
    },
    entry_points={
        "apache_airflow_provider": ["provider_info=airflow_kafka_stream:get_provider_info"],
        "console_scripts": ["airflow-kafka-stream=airflow_kafka_stream.cli:main"],
        "airflow.plugins": ["airflow_kafka_stream=airflow_kafka_stream.plugins.job_page:StreamJobsPlugin"],
    },
)
