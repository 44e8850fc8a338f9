"""Spark's own Kafka connector (spark-sql-kafka-0-10) from Maven Central, cached outside the repository.

CI runs in a fresh clone on the same machine, so the jars live under the user's cache directory
(``~/.cache/kafkette/spark-kafka-<spark version>``, root overridable with ``$KAFKETTE_CACHE``)
where they survive clones; a new machine fetches them once. ``python -m kafkette.pipeline.connector``
(``make spark-kafka``) fetches them with Maven and retries; sessions get them as ``spark.jars``,
so starting a session never touches the network.

Maven rather than Spark's ``spark.jars.packages`` (Ivy): Maven Central as reached here has no
``spark-token-provider-kafka-0-10`` newer than 4.0.0, which the connector depends on. Maven lets us
swap in the 4.0.0 jar (its two classes, KafkaConfigUpdater and KafkaTokenUtil, are what the
connector calls; the tests against our broker prove the pair works).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

SCALA_BINARY_VERSION = "2.13"
TOKEN_PROVIDER_VERSION = "4.0.0"
ATTEMPTS = 3
STAMP = ".complete"

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.kafkette</groupId>
  <artifactId>spark-kafka-connector</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-sql-kafka-0-10_{scala}</artifactId>
      <version>{spark}</version>
      <exclusions>
        <exclusion>
          <groupId>org.apache.spark</groupId>
          <artifactId>spark-token-provider-kafka-0-10_{scala}</artifactId>
        </exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-token-provider-kafka-0-10_{scala}</artifactId>
      <version>{token}</version>
      <exclusions>
        <exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
"""


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kafkette"
    return Path(os.environ.get("KAFKETTE_CACHE", default))


def spark_version() -> str:
    from importlib.metadata import version

    return version("pyspark")


def jar_dir() -> Path:
    return cache_root() / f"spark-kafka-{spark_version()}"


def jars() -> list[Path]:
    """The connector and its runtime dependencies; empty until ``fetch()`` completed."""
    directory = jar_dir()
    return sorted(directory.glob("*.jar")) if (directory / STAMP).exists() else []


def session_conf() -> Mapping[str, str]:
    """SparkSession settings that put the connector on the driver's and executors' classpath."""
    found = jars()
    if not found:
        raise FileNotFoundError(f"Spark's Kafka connector is not in {jar_dir()}; run `make spark-kafka`")
    return {"spark.jars": ",".join(str(path) for path in found)}


def fetch() -> None:
    """Copy the connector's runtime jars into ``jar_dir()`` with Maven (its repository under the cache)."""
    directory = jar_dir()
    directory.mkdir(parents=True, exist_ok=True)
    pom = directory / "pom.xml"
    pom.write_text(_POM.format(scala=SCALA_BINARY_VERSION, spark=spark_version(), token=TOKEN_PROVIDER_VERSION))
    command = [
        "mvn",
        "-B",
        "-q",
        "-Dstyle.color=never",
        f"-Dmaven.repo.local={cache_root() / 'm2'}",
        "-Dmaven.wagon.http.retryHandler.count=5",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={directory}",
        "-DincludeScope=runtime",
    ]
    subprocess.run(command, check=True)
    (directory / STAMP).touch()


def main() -> int:
    if jars():
        print(f"Spark's Kafka connector is in {jar_dir()}")
        return 0
    for attempt in range(1, ATTEMPTS + 1):
        try:
            fetch()
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"fetching Spark's Kafka connector failed (attempt {attempt}): {exc}", file=sys.stderr)
            if attempt < ATTEMPTS:
                # Maven Central hiccups are short; a growing pause rides them out.
                time.sleep(10 * attempt)
        else:
            print(f"Spark's Kafka connector is in {jar_dir()}: {len(jars())} jars")
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
