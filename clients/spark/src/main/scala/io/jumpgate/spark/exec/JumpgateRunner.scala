package io.jumpgate.spark.exec

import java.io.IOException
import java.util.UUID
import java.util.concurrent.ConcurrentHashMap

import scala.collection.mutable.ArrayBuffer
import scala.util.control.NonFatal

import io.jumpgate.spark.{JumpgateConf, JumpgateStats}
import io.jumpgate.spark.client.{CompiledJob, JumpgateClient}
import io.jumpgate.spark.ntf.{NtfDecoders, NtfLayout}
import io.jumpgate.spark.receive.ReceiverService

import org.apache.spark.{SparkContext, SparkEnv}
import org.apache.spark.internal.Logging
import org.apache.spark.rdd.RDD
import org.apache.spark.scheduler.{SparkListener, SparkListenerEvent}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.execution.SQLExecution
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd

/** A Jumpgate job failed (the server's error, a broken stream, a timeout): run the subtree in Spark. */
final class JumpgateJobFailed(message: String) extends IOException(message)

/**
 * Runs one [[JumpgateExec]] as one Jumpgate job, on the driver, when Spark executes the node:
 *
 *  1. open one listening socket per destination in the receiver service (executor side: in local
 *     mode the driver's JVM is the executor's);
 *  2. POST /v1/jobs with those ports in the `send`s; check every output layout against Spark's types
 *     and generate its decoder;
 *  3. tell the destinations how many streams to expect, POST execute;
 *  4. long-poll the job until it ends, watching the destinations for broken streams;
 *  5. once the job succeeded and every stream ended with a correct count, hand Spark a
 *     [[JumpgateRDD]] over the buffered destinations.
 *
 * Any failure cancels the job (DELETE), releases the destinations and raises: the caller runs the
 * Spark subtree instead.
 */
object JumpgateRunner extends Logging {
  private val StreamGraceMs = 30000L
  private val LongPollS = 0.25

  def run(exec: JumpgateExec, conf: JumpgateConf): RDD[InternalRow] = {
    val sc = exec.sc
    if (!sc.isLocal) throw new JumpgateJobFailed("receivers run only in local mode in this version (see docs/spark.md)")
    val frag = exec.frag
    val client = JumpgateClient(conf.url, conf.httpTimeoutMs)
    val files = frag.drivingScan.scan.get.files
    val parallelism = if (conf.maxStreams > 0) conf.maxStreams else sc.defaultParallelism
    val groups = JumpgateExec.balance(files, parallelism)
    val spread = if (groups.size == 1 && parallelism > 1 && conf.operatorEnabled("shuffle") &&
      files.map(_.bytes).sum >= conf.spreadMinBytes &&
      io.jumpgate.spark.planner.Capabilities.of(client).operations.contains("shuffle")) parallelism else 1
    val key = UUID.randomUUID().toString
    val service = ReceiverService.get
    val started = System.nanoTime()
    var job: Option[CompiledJob] = None
    Cleanup.register(sc, key)
    try {
      val host = conf.listenAddress
      val destinations = math.max(groups.size, spread)
      val ports = service.open(key, destinations, host, conf.maxBufferBytes)
      logDebug(s"Jumpgate: [${exec.describe}] receives on $host port(s) ${ports.mkString(", ")}")
      def submit(spreadTo: Int) = {
        val sends = ports.take(math.max(groups.size, spreadTo)).map(p => (host, p))
        val request = JumpgateExec.buildRequest(frag, groups, sends, s"spark-${exec.id}", spreadTo)
        retryOn503(conf.jobTimeoutMs)(client.submit(request.toJson))
      }
      val (compiled, used) = try (submit(spread), destinations) catch {
        case r: io.jumpgate.spark.client.RequestRejected if spread > 1 =>
          logInfo(s"Jumpgate: spreading the output with a shuffle was rejected (${r.message}); one destination")
          (1 until destinations).foreach(i => service.release(key, i))
          (submit(1), 1)
      }
      job = Some(compiled)
      val outputs = (0 until used).map { k =>
        compiled.outputs.getOrElse(s"out_g$k", throw new JumpgateJobFailed(s"the server's answer has no output out_g$k"))
      }
      val layouts = outputs.map(o => NtfLayout.fromJson(o.layout))
      try layouts.foreach(_.check(exec.output.map(_.dataType))) catch {
        case e: IllegalArgumentException => throw new JumpgateJobFailed(s"unexpected NTF layout: ${e.getMessage}")
      }
      layouts.foreach(NtfDecoders.decoder) // compile now, once, on the driver
      service.expect(key, outputs.map(_.expectedStreams), layouts.map(_.fixedSize))
      retryOn503(conf.jobTimeoutMs)(client.execute(compiled.jobId))
      await(client, compiled.jobId, service, key, conf.jobTimeoutMs)
      if (!service.await(key, StreamGraceMs))
        throw new JumpgateJobFailed(service.failure(key).getOrElse("the job succeeded but its streams did not end"))
      val streams = service.destinationsOf(key).flatMap(_.data)
      exec.metrics("jgRows") += streams.map(_.tuples).sum
      exec.metrics("jgBytes") += streams.map(_.bytes).sum
      exec.metrics("jgTime") += (System.nanoTime() - started) / 1000000L
      exec.metrics("jgJobs") += 1
      postDriverMetrics(sc, exec.metrics.values.toSeq)
      JumpgateStats.job(streams.map(_.tuples).sum, streams.map(_.bytes).sum)
      val executorId = SparkEnv.get.executorId
      val hostName = SparkEnv.get.blockManager.blockManagerId.host
      val rdd = new JumpgateRDD(sc, key, outputs.head.layoutJson, exec.output.size,
        (0 until used).map(_ => JumpgateRDD.executorLocation(hostName, executorId)), exec.metrics("numOutputRows"))
        .asInstanceOf[RDD[InternalRow]]
      Cleanup.finished(key)
      rdd
    } catch {
      case e: Throwable =>
        Cleanup.finished(key)
        val ports = service.destinationsOf(key).map(_.port)
        job.foreach(j => client.cancelQuietly(j.jobId))
        service.release(key)
        logDebug(s"Jumpgate: job ${job.map(_.jobId).getOrElse("(not submitted)")} failed; its destinations were " +
          s"port(s) ${ports.mkString(", ")}: $e")
        throw e
    }
  }

  /** A 503 (no free NCA resources: other jobs are running) is retried, as the contract asks, with a
   *  growing pause, until the job timeout. */
  private def retryOn503[T](timeoutMs: Long)(call: => T): T = {
    val deadline = System.currentTimeMillis() + timeoutMs
    var pause = 20L
    while (true) {
      try return call catch {
        case r: io.jumpgate.spark.client.RequestRejected if r.status == 503 && System.currentTimeMillis() + pause < deadline =>
          Thread.sleep(pause)
          pause = math.min(500L, pause * 2)
      }
    }
    throw new IllegalStateException("unreachable")
  }

  private def await(client: JumpgateClient, jobId: String, service: ReceiverService, key: String, timeoutMs: Long): Unit = {
    val deadline = System.currentTimeMillis() + timeoutMs
    while (true) {
      val st = client.status(jobId, LongPollS)
      if (st.state == "succeeded") return
      if (st.state == "failed" || st.state == "cancelled")
        throw new JumpgateJobFailed(s"job $jobId ${st.state}: ${st.error.getOrElse("no reason given")}")
      service.failure(key).foreach { why =>
        // A broken stream usually follows a failing NCA: give the server a moment to say why.
        val settle = System.currentTimeMillis() + 3000
        var last = st
        while (!last.terminal && System.currentTimeMillis() < settle) last = client.status(jobId, LongPollS)
        throw new JumpgateJobFailed(s"job $jobId: ${last.error.getOrElse(why)}")
      }
      if (System.currentTimeMillis() > deadline)
        throw new JumpgateJobFailed(s"job $jobId did not finish within ${timeoutMs / 1000} s (spark.jumpgate.jobTimeout)")
    }
  }

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
    @volatile private var listening: SparkContext = _

    def finished(key: String): Unit = running.remove(key)

    def register(sc: SparkContext, key: String): Unit = {
      running.add(key)
      ensureListener(sc)
      val id = sc.getLocalProperty(SQLExecution.EXECUTION_ID_KEY)
      if (id == null) return // no SQL execution: partitions are released as tasks read them
      val keys = byExecution.computeIfAbsent(id, _ => ArrayBuffer[String]())
      keys.synchronized(keys += key)
    }

    private def ensureListener(sc: SparkContext): Unit = synchronized {
      if (listening ne sc) {
        sc.addSparkListener(new SparkListener {
          override def onOtherEvent(event: SparkListenerEvent): Unit = event match {
            case e: SparkListenerSQLExecutionEnd =>
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
