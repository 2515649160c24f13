package io.jumpgate.spark

import java.util.concurrent.atomic.AtomicLong

import io.jumpgate.core.stats.ClientStats

/**
 * Process-wide counters of what the plugin did, for tests and operators (py4j:
 * `spark._jvm.io.jumpgate.spark.JumpgateStats.fallbacks()`). SQL metrics carry the same per query.
 *
 * The counters every Jumpgate client has (jobs, rows, bytes, fallbacks, re-runs, REST look-ups,
 * receiver buffers) live in jvm-core's [[io.jumpgate.core.stats.ClientStats]]; this object adds
 * the planner's own and keeps the py4j names the tests and operators use.
 */
object JumpgateStats {
  private def core: ClientStats = ClientStats.get
  private val plannedC = new AtomicLong()
  // The planner's own cost: it runs on every adaptive re-plan, so it must stay cheap when nothing
  // can be offloaded (see OffloadPlanner's threshold pre-check).
  private val planRunsC = new AtomicLong()
  private val planSkippedC = new AtomicLong()
  private val planNanosC = new AtomicLong()
  private val planCpuNanosC = new AtomicLong()
  private val scansConvertedC = new AtomicLong()
  private val samplesReadC = new AtomicLong()

  def planned(n: Int): Unit = plannedC.addAndGet(n)
  def job(rows: Long, bytes: Long): Unit = core.job(rows, bytes)
  /** A partition read again from its buffer (a range partitioner's sample, a retried task). */
  def reread(): Unit = core.reread()
  /** A partition whose buffer was gone, served by running its job again. */
  def rerun(reason: String): Unit = core.rerun(reason)
  def fallback(reason: String): Unit = core.fallback(reason)

  /** One planner run: its wall-clock and CPU nanoseconds; `skipped` when the threshold pre-check
   *  made the rest of planning moot. */
  def planning(nanos: Long, cpuNanos: Long, skipped: Boolean): Unit = {
    planRunsC.incrementAndGet(); planNanosC.addAndGet(nanos); planCpuNanosC.addAndGet(cpuNanos)
    if (skipped) planSkippedC.incrementAndGet()
  }
  def scanConverted(): Unit = scansConvertedC.incrementAndGet()
  def sampleRead(): Unit = samplesReadC.incrementAndGet()

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
  def capabilityLookups(): Long = core.capabilityLookups
  /** Requests that asked a server for its data root (spark.jumpgate.dataRoot unset; once per server). */
  def dataRootLookups(): Long = core.dataRootLookups
  def jobs(): Long = core.jobs
  def fallbacks(): Long = core.fallbacks
  /** Jobs run again because a partition of their output was read after its buffer was gone. */
  def reruns(): Long = core.reruns
  /** Partitions read again from their buffers (Spark computed them more than once). */
  def rereads(): Long = core.rereads
  def rowsReceived(): Long = core.rowsReceived
  def bytesReceived(): Long = core.bytesReceived
  def fallbackReasons(): java.util.List[String] = core.fallbackReasons
  def rerunReasons(): java.util.List[String] = core.rerunReasons
  /** Destinations still buffered or listening in this JVM (0 when nothing leaked). */
  def openDestinations(): Int = core.openDestinations
  def bufferedBytes(): Long = core.bufferedBytes
  /** Live threads of the receiver service in this JVM. */
  def receiverThreads(): Int = core.receiverThreads

  def reset(): Unit = {
    Seq(plannedC, planRunsC, planSkippedC, planNanosC, planCpuNanosC, scansConvertedC, samplesReadC).foreach(_.set(0))
    core.reset()
  }
}
