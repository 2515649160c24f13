package org.apache.spark.jumpgate

import java.util.{Collections, Map => JMap}

import org.apache.spark.SparkContext
import org.apache.spark.api.plugin.{DriverPlugin, ExecutorPlugin, PluginContext, SparkPlugin}
import org.apache.spark.internal.Logging

/**
 * `spark.plugins=org.apache.spark.jumpgate.JumpgatePlugin`: the one setting that enables Jumpgate.
 *
 * The driver side adds [[io.jumpgate.spark.JumpgateExtensions]] to spark.sql.extensions and
 * [[io.jumpgate.spark.JumpgateExplain]] to spark.sql.extendedExplainProviders before any session is
 * made (it lives in package org.apache.spark to reach SparkContext's configuration, as DataFusion
 * Comet's plugin does). The executor side starts the receiver service of its JVM.
 */
class JumpgatePlugin extends SparkPlugin {
  override def driverPlugin(): DriverPlugin = new JumpgateDriverPlugin
  override def executorPlugin(): ExecutorPlugin = new JumpgateExecutorPlugin
}

class JumpgateDriverPlugin extends DriverPlugin with Logging {
  override def init(sc: SparkContext, ctx: PluginContext): JMap[String, String] = {
    io.jumpgate.spark.SparkCoreLog.install()
    JumpgatePlugin.append(sc, "spark.sql.extensions", "io.jumpgate.spark.JumpgateExtensions")
    JumpgatePlugin.append(sc, "spark.sql.extendedExplainProviders", "io.jumpgate.spark.JumpgateExplain")
    logInfo("Jumpgate plugin: offload planning installed")
    Collections.emptyMap()
  }
}

class JumpgateExecutorPlugin extends ExecutorPlugin {
  override def init(ctx: PluginContext, extraConf: JMap[String, String]): Unit = {
    io.jumpgate.spark.SparkCoreLog.install()
    io.jumpgate.core.receive.ReceiverService.get
  }
}

object JumpgatePlugin {
  private[jumpgate] def append(sc: SparkContext, key: String, value: String): Unit = {
    val cur = sc.conf.get(key, "").split(",").map(_.trim).filter(_.nonEmpty)
    if (!cur.contains(value)) sc.conf.set(key, (cur :+ value).mkString(","))
  }
}
