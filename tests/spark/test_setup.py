"""The plugin enabled the way docs/spark.md says, with nothing else: the jar, the plugin line and
the server's URL. `spark.jumpgate.dataRoot` is unset, so the plugin asks the server for its data
root (once) and offloads. A fresh Spark application in its own JVM: the suite's shared session sets
the data root, and a JVM's plugin settings cannot change once it runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from . import tpcds

# What the child process runs: a session with only the plugin's three settings (the UI off, so a
# second Spark on the machine needs no port), the query with offloading off and on, the answers
# and the plugin's counters as one JSON line.
SCRIPT = r"""
import json, sys
from pyspark.sql import SparkSession

jar, url, table_dir, ddl = sys.argv[1:5]
spark = (SparkSession.builder.master("local[2]").appName("jumpgate-setup")
         .config("spark.jars", jar)
         .config("spark.plugins", "org.apache.spark.jumpgate.JumpgatePlugin")
         .config("spark.jumpgate.url", url)
         .config("spark.ui.enabled", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.read.schema(ddl).json(table_dir).createOrReplaceTempView("store_sales")
sql = "SELECT ss_item_sk, ss_ticket_number, ss_net_profit FROM store_sales WHERE ss_quantity > 97"
stats = spark._jvm.io.jumpgate.spark.JumpgateStats
spark.conf.set("spark.jumpgate.enabled", "false")
off = sorted(map(repr, spark.sql(sql).collect()))
spark.conf.set("spark.jumpgate.enabled", "true")
df = spark.sql(sql)
on = sorted(map(repr, df.collect()))
report = str(spark._jvm.io.jumpgate.spark.JumpgateTesting.report(df._jdf.queryExecution()))
again = spark.sql(sql).collect()  # planned again: the data root is not asked for again
print(json.dumps({"equal": off == on, "rows": len(on), "jobs": stats.jobs(), "fallbacks": stats.fallbacks(),
                  "data_root_lookups": stats.dataRootLookups(), "data_root_set": spark.conf.get("spark.jumpgate.dataRoot", None),
                  "report": report}))
spark.stop()
"""


def test_the_plugin_line_and_the_url_are_enough(spark_jar, jg_server, data_root, tmp_path):
    nodes = jg_server.http.get("/v1/nodes").json()  # what the plugin reads the data root from
    assert {n["data_root"] for n in nodes} == {str(data_root.resolve())}, nodes
    cols = tpcds.schemas(data_root / "tpcds")["store_sales"]
    ddl = ", ".join(f"`{c['name']}` {c['type']}" for c in cols)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(spark_jar), jg_server.url,
                           str(data_root / "tpcds" / "store_sales"), ddl],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["data_root_set"] is None
    assert result["equal"] and result["rows"] > 0, result
    assert result["jobs"] >= 2 and result["fallbacks"] == 0, result["report"]
    assert "JumpgateExec [Scan json" in result["report"], result["report"]
    assert result["data_root_lookups"] == 1, result
