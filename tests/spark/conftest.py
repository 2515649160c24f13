"""Fixtures of the Spark client's tests: the plugin jar, a real `jumpgate serve` over a data root
with TPC-DS (SF 0.1, JSON Lines) and small tables, and one local[2] SparkSession for the whole run
(the JVM is reused by every test; offloading is switched per query with spark.conf)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from jumpgate.local_server import LocalServer

from . import tpcds

PROJECT = Path(__file__).resolve().parents[2]
JAR = PROJECT / "clients" / "spark" / "target" / "jumpgate-spark-0.1.0.jar"
SF = float(os.environ.get("JUMPGATE_SPARK_SF", "0.1"))
DATA = Path(os.environ.get("JUMPGATE_SPARK_DATA") or PROJECT / ".jumpgate" / "spark-tests")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def spark_jar() -> Path:
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.fail("the Spark client's tests need Java 17+ and Maven (see clients/spark/README.md)")
    subprocess.run(["bash", str(PROJECT / "clients" / "spark" / "build.sh")], check=True)
    return JAR


@pytest.fixture(scope="session")
def data_root() -> Path:
    DATA.mkdir(parents=True, exist_ok=True)
    tpcds.generate(DATA, SF)
    return DATA


@pytest.fixture(scope="session")
def jg_server(data_root, tmp_path_factory):
    cache = Path(os.environ.get("JUMPGATE_TEST_CACHE") or tmp_path_factory.mktemp("cache"))
    srv = LocalServer(data_root, cache, tmp_path_factory.mktemp("logs") / "server.log")
    yield srv
    left = srv.children()
    srv.stop()
    assert not left, f"NCA processes left behind: {left}"


@pytest.fixture(scope="session")
def spark(spark_jar, jg_server, data_root):
    pyspark = pytest.importorskip("pyspark", reason="pip install -e '.[spark]'")
    from pyspark.sql import SparkSession

    from .helpers import base_conf
    # Two cores, and a failed task is tried once more, as on a cluster (tests of retried tasks rely on it).
    builder = SparkSession.builder.master("local[2,2]").appName("jumpgate-tests")
    for k, v in base_conf(spark_jar, jg_server.url, data_root).items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    assert pyspark.__version__ == "4.3.0", pyspark.__version__
    tpcds.register(session, data_root / "tpcds")
    yield session
    session.stop()


def pytest_terminal_summary(terminalreporter):
    from . import report
    text = report.lines()
    if text:
        terminalreporter.section("Jumpgate Spark client: TPC-DS")
        for line in text:
            terminalreporter.write_line(line)
        try:
            (DATA / "tpcds-report.txt").write_text("\n".join(text) + "\n")
        except OSError:
            pass
