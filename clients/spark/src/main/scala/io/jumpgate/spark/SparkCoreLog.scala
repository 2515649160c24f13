package io.jumpgate.spark

import org.apache.spark.internal.Logging

import io.jumpgate.core.Log

/** Routes jvm-core's log lines (the receiver service's warnings) to Spark's logging. */
object SparkCoreLog extends Log.Sink with Logging {
  @volatile private var installed = false

  def install(): Unit = if (!installed) { Log.setSink(this); installed = true }

  override def warn(message: String): Unit = logWarning(message)
  override def debug(message: String): Unit = logDebug(message)
  override def debugEnabled(): Boolean = log.isDebugEnabled
}
