#!/usr/bin/env python3
"""The kafkette/spark container's entrypoint: Spark's Kubernetes container contract.

Spark's Kubernetes scheduler backend starts its pods with one argument and passes the rest in the
environment: `driver` (cluster mode: spark-submit in client mode inside the pod, bound to the pod's
address) and `executor` (KubernetesExecutorBackend with the SPARK_* values the driver put in the pod).
Anything else runs as given. tini is PID 1 (the image's ENTRYPOINT starts it), this script execs the command.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence

JAVA_OPTION = re.compile(r"SPARK_JAVA_OPT_(\d+)")
EXECUTOR_BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
# Executor flag -> the environment variable the driver sets on the executor pod.
EXECUTOR_ARGUMENTS = (
    ("--driver-url", "SPARK_DRIVER_URL"),
    ("--executor-id", "SPARK_EXECUTOR_ID"),
    ("--cores", "SPARK_EXECUTOR_CORES"),
    ("--app-id", "SPARK_APPLICATION_ID"),
    ("--hostname", "SPARK_EXECUTOR_POD_IP"),
    ("--resourceProfileId", "SPARK_RESOURCE_PROFILE_ID"),
    ("--podName", "SPARK_EXECUTOR_POD_NAME"),
)


class ContractError(Exception):
    """The pod lacks what Spark's contract promises (a missing SPARK_* value)."""


def java_options(env: Mapping[str, str]) -> list[str]:
    """SPARK_JAVA_OPT_<n> values in the order of n (Spark numbers them from 0)."""
    numbered = [(int(match[1]), value) for key, value in env.items() if (match := JAVA_OPTION.fullmatch(key))]
    return [value for _, value in sorted(numbered)]


def classpath(env: Mapping[str, str]) -> str:
    """Spark's configuration folder, Hadoop's if set, then extra entries around Spark's own jars."""
    home = env["SPARK_HOME"]
    entries = [
        env.get("SPARK_CONF_DIR", f"{home}/conf"),
        env.get("HADOOP_CONF_DIR", ""),
        env.get("SPARK_CLASSPATH", ""),
        f"{home}/jars/*",
        env.get("SPARK_EXTRA_CLASSPATH", ""),
        env.get("SPARK_DIST_CLASSPATH", ""),
    ]
    return ":".join(entry for entry in entries if entry)


def required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise ContractError(f"{name} is not set; Spark's driver sets it on the pods it creates")
    return value


def driver(arguments: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """spark-submit of the application in client mode: the pod itself is the driver."""
    bind = required(env, "SPARK_DRIVER_BIND_ADDRESS")
    return [
        f"{env['SPARK_HOME']}/bin/spark-submit",
        "--conf",
        f"spark.driver.bindAddress={bind}",
        "--deploy-mode",
        "client",
        *arguments,
    ]


def executor(env: Mapping[str, str]) -> list[str]:
    memory = required(env, "SPARK_EXECUTOR_MEMORY")
    command = [
        f"{required(env, 'JAVA_HOME')}/bin/java",
        *java_options(env),
        f"-Xms{memory}",
        f"-Xmx{memory}",
        "-cp",
        classpath(env),
        EXECUTOR_BACKEND,
    ]
    for flag, name in EXECUTOR_ARGUMENTS:
        command += [flag, required(env, name)]
    return command


def command(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """What the container runs for the arguments it was given."""
    if not argv:
        raise ContractError("usage: driver ARGS... | executor | COMMAND ARGS...")
    if argv[0] == "driver":
        return driver(argv[1:], env)
    if argv[0] == "executor":
        return executor(env)
    return list(argv)


def main() -> None:
    try:
        run = command(sys.argv[1:], os.environ)
    except ContractError as error:
        sys.exit(f"kafkette-spark-entrypoint: {error}")
    os.execvp(run[0], run)


if __name__ == "__main__":
    main()
