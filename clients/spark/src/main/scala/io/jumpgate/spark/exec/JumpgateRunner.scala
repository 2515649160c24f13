package io.jumpgate.spark.exec

import java.util.UUID
import java.util.concurrent.ConcurrentHashMap

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import io.jumpgate.core.client.{Capabilities, JumpgateClient, OutputInfo, RequestRejected}
import io.jumpgate.core.ntf.NtfLayout
import io.jumpgate.core.receive.ReceiverService
import io.jumpgate.core.request.Request
import io.jumpgate.core.run.{JobFailedException, JobRunner}
import io.jumpgate.spark.{JumpgateConf, JumpgateStats, SparkCoreLog}
import io.jumpgate.spark.ntf.NtfDecoders
import io.jumpgate.spark.planner.Types

import org.apache.spark.{SparkContext, SparkEnv}
import org.apache.spark.internal.Logging
import org.apache.spark.rdd.RDD
import org.apache.spark.scheduler.{SparkListener, SparkListenerEvent}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.execution.SQLExecution
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd

/** A Jumpgate job failed (the server's error, a broken stream, a timeout): run the subtree in Spark.
 *  jvm-core's [[io.jumpgate.core.run.JobRunner]] raises its own JobFailedException for the same. */
final class JumpgateJobFailed(message: String) extends JobFailedException(message)

/**
 * Runs one [[JumpgateExec]] as one Jumpgate job, on the driver, when Spark executes the node (see
 * [[JumpgateRunner.runJob]] for the steps), and hands Spark a [[JumpgateRDD]] over the buffered
 * destinations once every stream has ended with a correct count. The RDD carries an [[OutputSpec]]
 * (the request again, and the settings) so that a partition whose buffer is gone can be produced
 * again by a re-run of the job, or by Spark's own plan ([[JumpgateFallback]]).
 *
 * Any failure of the first run cancels the job (DELETE), releases the destinations and raises: the
 * caller runs the Spark subtree instead.
 */
object JumpgateRunner extends Logging {
  private val StreamGraceMs = 30000L
  private val LongPollS = 0.25

  def run(exec: JumpgateExec, conf: JumpgateConf): RDD[InternalRow] = {
    val sc = exec.sc
    if (!sc.isLocal) throw new JumpgateJobFailed("receivers run only in local mode in this version (see docs/spark.md)")
    val frag = exec.frag
    val client = JumpgateClient.shared(conf.url, conf.httpTimeoutMs, conf.token.orNull)
    val files = frag.drivingScan.scan.get.files
    val parallelism = if (conf.maxStreams > 0) conf.maxStreams else sc.defaultParallelism
    val groups = JumpgateExec.balance(files, parallelism)
    val spread = if (groups.size == 1 && parallelism > 1 && conf.operatorEnabled("shuffle") &&
      files.map(_.bytes).sum >= conf.spreadMinBytes &&
      Capabilities.of(client).has("shuffle")) parallelism else 1
    val key = UUID.randomUUID().toString
    val started = System.nanoTime()
    val executionId = Option(sc.getLocalProperty(SQLExecution.EXECUTION_ID_KEY))
    val types = exec.output.map(_.dataType)
    def request(spreadTo: Int)(sends: Seq[(String, Int)]) =
      JumpgateExec.buildRequest(frag, groups, sends, s"spark-${exec.id}", spreadTo)
    val (req, outputs) = try {
      val n = math.max(groups.size, spread)
      (request(spread) _, runJob(Some(sc), client, conf, key, n, executionId, request(spread), checkTypes(types)))
    } catch {
      case r: RequestRejected if spread > 1 =>
        logInfo(s"Jumpgate: spreading the output with a shuffle was rejected (${r.serverMessage}); one destination")
        (request(1) _, runJob(Some(sc), client, conf, key, math.max(groups.size, 1), executionId, request(1), checkTypes(types)))
    }
    val streams = ReceiverService.get.destinationsOf(key).asScala.flatMap(_.data.asScala)
    exec.metrics("jgRows") += streams.map(_.tuples).sum
    exec.metrics("jgBytes") += streams.map(_.bytes).sum
    exec.metrics("jgTime") += (System.nanoTime() - started) / 1000000L
    exec.metrics("jgJobs") += 1
    postDriverMetrics(sc, exec.metrics.values.toSeq)
    JumpgateStats.job(streams.map(_.tuples).sum, streams.map(_.bytes).sum)
    val executorId = SparkEnv.get.executorId
    val hostName = SparkEnv.get.blockManager.blockManagerId.host
    val sendsTemplate = (0 until outputs.size).map(_ => (conf.listenAddress, 0))
    val spec = OutputSpec(key, req(sendsTemplate), outputs.map(_.layoutJson), exec.output.size, exec.describe,
      exec.settings)
    val rdd = new JumpgateRDD(sc, spec, (0 until outputs.size).map(_ => JumpgateRDD.executorLocation(hostName, executorId)),
      exec.metrics("numOutputRows"), exec.metrics("jgReruns"), exec.metrics("fallbacks"))
    JumpgateFallback.register(rdd, exec, if (spread > 1) Nil else groups)
    rdd.asInstanceOf[RDD[InternalRow]]
  }

  /** Checks each output layout against the Spark types the node promised. */
  private def checkTypes(types: Seq[org.apache.spark.sql.types.DataType])(layouts: Seq[NtfLayout]): Unit =
    try layouts.foreach(Types.checkLayout(_, types)) catch {
      case e: IllegalArgumentException => throw new JumpgateJobFailed(s"unexpected NTF layout: ${e.getMessage}")
    }

  /**
   * Runs one job whose `n` sends (`out_g0` .. `out_g<n-1>`) land in destinations 0..n-1 of `key`
   * in this JVM's receiver service, and returns once every stream has ended with a correct count:
   * jvm-core's [[JobRunner]] (open the sockets, submit, `check` the output layouts, execute,
   * long-poll, wait for the streams; on any failure cancel, release, raise). Here: the layouts'
   * decoders are compiled before the job runs, and the destinations stay buffered until
   * `executionId` ends (see [[Cleanup]]), or, without one, as the reading RDD decides. Used by the
   * first run of a node and by a re-run of its output ([[JumpgateRDD]]).
   */
  private[exec] def runJob(sc: Option[SparkContext], client: JumpgateClient, conf: JumpgateConf, key: String, n: Int,
                           executionId: Option[String], request: Seq[(String, Int)] => Request,
                           check: Seq[NtfLayout] => Unit): Seq[OutputInfo] = {
    SparkCoreLog.install()
    Cleanup.register(sc, key, executionId)
    val settings = new JobRunner.Settings(conf.listenAddress, conf.maxBufferBytes, JumpgateConf.RECEIVER_MAX_BYTES,
      conf.jobTimeoutMs, JumpgateConf.JOB_TIMEOUT_S, StreamGraceMs, LongPollS)
    try {
      JobRunner.run(client, ReceiverService.get, key, n, settings,
        addresses => request(addresses.asScala.map(a => (a.host, a.port)).toSeq),
        k => s"out_g$k",
        layouts => {
          val ls = layouts.asScala.toSeq
          check(ls)
          ls.foreach(NtfDecoders.decoder) // compile now, once
        }).asScala.toSeq
    } finally Cleanup.finished(key)
  }

  /** Whether a SQL execution owns `key`'s destinations (and its end releases them). */
  private[exec] def ownedByExecution(key: String): Boolean = Cleanup.owned(key)

  def postDriverMetrics(sc: SparkContext, metrics: Seq[SQLMetric]): Unit = {
    val id = sc.getLocalProperty(SQLExecution.EXECUTION_ID_KEY)
    if (id != null) SQLMetrics.postDriverMetricUpdates(sc, id, metrics)
  }

  /** Releases a SQL execution's leftover destinations when it ends (a LIMIT may leave some unread).
   *  Only those of jobs that have finished: the execution id comes from the calling thread's local
   *  properties, which a pooled thread may have inherited from an earlier execution, and that
   *  execution's end (delivered late by the listener bus) must not close a running job's
   *  destinations under its NCAs. A running job releases its own on failure. */
  private object Cleanup {
    private val byExecution = new ConcurrentHashMap[String, ArrayBuffer[String]]()
    private val running = ConcurrentHashMap.newKeySet[String]()
    /** Ids of SQL executions that have ended (the most recent ones: ids only grow). */
    private val ended = java.util.Collections.synchronizedSet(java.util.Collections.newSetFromMap(
      new java.util.LinkedHashMap[String, java.lang.Boolean]() {
        override def removeEldestEntry(e: java.util.Map.Entry[String, java.lang.Boolean]): Boolean = size > 10000
      }))
    @volatile private var listening: SparkContext = _

    def finished(key: String): Unit = running.remove(key)

    def owned(key: String): Boolean = byExecution.values().stream().anyMatch(keys => keys.synchronized(keys.contains(key)))

    /** Buffers of `key` live until SQL execution `executionId` ends: every stage of the execution
     *  may read a partition again (a range partitioner samples its input before the shuffle map
     *  stage reads it, a failed task is retried). Without one, a task that read a partition releases
     *  it, and a later read re-runs the job ([[OutputRecovery]]). */
    def register(sc: Option[SparkContext], key: String, executionId: Option[String]): Unit = {
      running.add(key)
      sc.foreach(ensureListener)
      // A thread may carry the id of an execution that has ended (local properties are inherited):
      // its end will not come again, so such a key is left to the reading RDD.
      executionId.filterNot(ended.contains).foreach { id =>
        val keys = byExecution.computeIfAbsent(id, _ => ArrayBuffer[String]())
        keys.synchronized(keys += key)
      }
    }

    private def ensureListener(sc: SparkContext): Unit = synchronized {
      if (listening ne sc) {
        sc.addSparkListener(new SparkListener {
          override def onOtherEvent(event: SparkListenerEvent): Unit = event match {
            case e: SparkListenerSQLExecutionEnd =>
              ended.add(e.executionId.toString)
              Option(byExecution.remove(e.executionId.toString))
                .foreach(keys => keys.synchronized(keys.filterNot(running.contains).foreach(k => ReceiverService.get.release(k))))
            case _ =>
          }
        })
        listening = sc
      }
    }
  }
}
