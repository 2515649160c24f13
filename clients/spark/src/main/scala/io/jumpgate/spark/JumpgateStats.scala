package io.jumpgate.spark

import java.util.concurrent.ConcurrentLinkedDeque
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._

import io.jumpgate.spark.receive.ReceiverService

/**
 * Process-wide counters of what the plugin did, for tests and operators (py4j:
 * `spark._jvm.io.jumpgate.spark.JumpgateStats.fallbacks()`). SQL metrics carry the same per query.
 */
object JumpgateStats {
  private val plannedC = new AtomicLong()
  private val jobsC = new AtomicLong()
  private val fallbacksC = new AtomicLong()
  private val rerunsC = new AtomicLong()
  private val rereadsC = new AtomicLong()
  private val rowsC = new AtomicLong()
  private val bytesC = new AtomicLong()
  private val reasons = new ConcurrentLinkedDeque[String]()
  private val rerunWhy = new ConcurrentLinkedDeque[String]()
  // The planner's own cost: it runs on every adaptive re-plan, so it must stay cheap when nothing
  // can be offloaded (see OffloadPlanner's threshold pre-check).
  private val planRunsC = new AtomicLong()
  private val planSkippedC = new AtomicLong()
  private val planNanosC = new AtomicLong()
  private val planCpuNanosC = new AtomicLong()
  private val scansConvertedC = new AtomicLong()
  private val samplesReadC = new AtomicLong()
  private val capabilityLookupsC = new AtomicLong()
  private val dataRootLookupsC = new AtomicLong()

  def planned(n: Int): Unit = plannedC.addAndGet(n)
  def job(rows: Long, bytes: Long): Unit = { jobsC.incrementAndGet(); rowsC.addAndGet(rows); bytesC.addAndGet(bytes) }
  /** A partition read again from its buffer (a range partitioner's sample, a retried task). */
  def reread(): Unit = rereadsC.incrementAndGet()
  /** A partition whose buffer was gone, served by running its job again. */
  def rerun(reason: String): Unit = {
    rerunsC.incrementAndGet()
    rerunWhy.addLast(reason)
    while (rerunWhy.size > 100) rerunWhy.pollFirst()
  }
  def fallback(reason: String): Unit = {
    fallbacksC.incrementAndGet()
    reasons.addLast(reason)
    while (reasons.size > 100) reasons.pollFirst()
  }

  /** One planner run: its wall-clock and CPU nanoseconds; `skipped` when the threshold pre-check
   *  made the rest of planning moot. */
  def planning(nanos: Long, cpuNanos: Long, skipped: Boolean): Unit = {
    planRunsC.incrementAndGet(); planNanosC.addAndGet(nanos); planCpuNanosC.addAndGet(cpuNanos)
    if (skipped) planSkippedC.incrementAndGet()
  }
  def scanConverted(): Unit = scansConvertedC.incrementAndGet()
  def sampleRead(): Unit = samplesReadC.incrementAndGet()
  def capabilityLookup(): Unit = capabilityLookupsC.incrementAndGet()
  def dataRootLookup(): Unit = dataRootLookupsC.incrementAndGet()

  def plannedCandidates(): Long = plannedC.get
  /** Planner runs (one per physical planning and adaptive re-plan of a query with offloading on). */
  def planningRuns(): Long = planRunsC.get
  /** Planner runs that the threshold pre-check ended before converting anything. */
  def planningSkipped(): Long = planSkippedC.get
  /** Wall-clock nanoseconds spent in the planner, over all its runs. */
  def planningNanos(): Long = planNanosC.get
  /** CPU nanoseconds of the planning thread in the planner (wall time minus waits and preemption). */
  def planningCpuNanos(): Long = planCpuNanosC.get
  /** File scans the planner converted (listed their files and estimated their rows). */
  def scansConverted(): Long = scansConvertedC.get
  /** JSON Lines files whose head was read to estimate rows (the cache missed). */
  def samplesRead(): Long = samplesReadC.get
  /** GET /v1/ncas requests made while planning (the capability cache missed). */
  def capabilityLookups(): Long = capabilityLookupsC.get
  /** Requests that asked a server for its data root (spark.jumpgate.dataRoot unset; once per server). */
  def dataRootLookups(): Long = dataRootLookupsC.get
  def jobs(): Long = jobsC.get
  def fallbacks(): Long = fallbacksC.get
  /** Jobs run again because a partition of their output was read after its buffer was gone. */
  def reruns(): Long = rerunsC.get
  /** Partitions read again from their buffers (Spark computed them more than once). */
  def rereads(): Long = rereadsC.get
  def rowsReceived(): Long = rowsC.get
  def bytesReceived(): Long = bytesC.get
  def fallbackReasons(): java.util.List[String] = reasons.asScala.toList.asJava
  def rerunReasons(): java.util.List[String] = rerunWhy.asScala.toList.asJava
  /** Destinations still buffered or listening in this JVM (0 when nothing leaked). */
  def openDestinations(): Int = ReceiverService.get.openDestinations
  def bufferedBytes(): Long = ReceiverService.get.bufferedBytes
  /** Live threads of the receiver service in this JVM. */
  def receiverThreads(): Int = Thread.getAllStackTraces.keySet.asScala.count(_.getName.startsWith("jumpgate-"))

  def reset(): Unit = Seq(plannedC, jobsC, fallbacksC, rerunsC, rereadsC, rowsC, bytesC, planRunsC, planSkippedC, planNanosC,
    planCpuNanosC, scansConvertedC, samplesReadC, capabilityLookupsC, dataRootLookupsC).foreach(_.set(0))
}
