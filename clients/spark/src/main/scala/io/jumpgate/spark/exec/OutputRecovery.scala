package io.jumpgate.spark.exec

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.OptionConverters._
import scala.util.control.NonFatal

import io.jumpgate.core.client.JumpgateClient
import io.jumpgate.core.receive.{Destination, ReceiverService}
import io.jumpgate.spark.{JumpgateConf, JumpgateStats}

import org.apache.spark.TaskContext
import org.apache.spark.internal.Logging
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.execution.SQLExecution
import org.apache.spark.sql.execution.metric.SQLMetric

/**
 * Serves a [[JumpgateRDD]] partition whose buffer is gone, so that such a partition is never an
 * error: first by re-running the job (the same request, so the same rows reach the same
 * destination: files are split into the same groups, a shuffle hashes the same keys), then, if
 * Jumpgate cannot answer, by Spark's own plan for that partition ([[JumpgateFallback]]). Each is
 * logged with the reason and counted in the node's SQL metrics (`jgReruns`, `fallbacks`) and in
 * [[JumpgateStats]].
 */
object OutputRecovery extends Logging {
  /** One lock per output: tasks missing partitions of the same output wait for one re-run. */
  private val locks = new ConcurrentHashMap[String, Object]()

  /** Drop the lock of an output no RDD can read any more. */
  private[exec] def forget(key: String): Unit = locks.remove(key)

  def ownedByExecution(key: String): Boolean = JumpgateRunner.ownedByExecution(key)

  /** Destination `index` of `spec`'s output, buffered or produced again; Left: why it cannot be. */
  def destination(spec: OutputSpec, index: Int, context: TaskContext, reruns: SQLMetric): Either[String, Destination] = {
    val service = ReceiverService.get
    def buffered = service.destination(spec.key, index).toScala.filter(_.isComplete)
    buffered match {
      case Some(d) => Right(d)
      case None =>
        locks.computeIfAbsent(spec.key, _ => new Object).synchronized {
          buffered match {
            case Some(d) => Right(d) // another task re-ran it meanwhile
            case None => rerun(spec, index, context, reruns).flatMap(_ =>
              buffered.toRight(s"the re-run's destination ${spec.key}[$index] was released before it was read"))
          }
        }
    }
  }

  private def rerun(spec: OutputSpec, index: Int, context: TaskContext, reruns: SQLMetric): Either[String, Unit] = {
    val conf = JumpgateConf(spec.settings.get)
    val why = s"output ${spec.key}[$index] is not buffered in this executor (released, evicted, or the task " +
      "ran elsewhere)"
    logWarning(s"Jumpgate: [${spec.describe}] $why; re-running its job")
    reruns += 1
    JumpgateStats.rerun(s"${spec.describe}: $why")
    val service = ReceiverService.get
    service.release(spec.key) // whatever is left of the output: the re-run replaces all of it
    val executionId = Option(context.getLocalProperty(SQLExecution.EXECUTION_ID_KEY))
    try {
      val client = JumpgateClient.shared(conf.url, conf.httpTimeoutMs, conf.token.orNull)
      val outputs = JumpgateRunner.runJob(None, client, conf, spec.key, spec.destinations, executionId,
        spec.requestFor, _ => ())
      val same = outputs.map(o => JumpgateClient.MAPPER.readTree(o.layoutJson)) ==
        spec.layoutJsons.map(j => JumpgateClient.MAPPER.readTree(j))
      if (!same) {
        service.release(spec.key)
        Left("the re-run's NTF layouts differ from the first run's")
      } else Right(())
    } catch {
      case NonFatal(e) => Left(s"re-running the job failed: ${e.getMessage}")
    }
  }

  /** Spark's own plan for partition `index`, or a clear error where the fragment has none. */
  def fallback(spec: OutputSpec, index: Int, context: TaskContext, why: String,
               fallbacks: SQLMetric): Iterator[InternalRow] = {
    JumpgateFallback.rows(spec.key, index, context) match {
      case Some(rows) =>
        logWarning(s"Jumpgate: [${spec.describe}] partition $index runs in Spark instead: $why")
        fallbacks += 1
        JumpgateStats.fallback(s"${spec.describe} (partition $index): $why")
        rows
      case None =>
        throw new JumpgateJobFailed(s"Jumpgate output ${spec.key}[$index] of [${spec.describe}] cannot be served: " +
          s"$why; and its Spark plan cannot run one partition on its own (it has an exchange or a subquery)")
    }
  }
}
