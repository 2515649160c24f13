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
  private val rowsC = new AtomicLong()
  private val bytesC = new AtomicLong()
  private val reasons = new ConcurrentLinkedDeque[String]()

  def planned(n: Int): Unit = plannedC.addAndGet(n)
  def job(rows: Long, bytes: Long): Unit = { jobsC.incrementAndGet(); rowsC.addAndGet(rows); bytesC.addAndGet(bytes) }
  def fallback(reason: String): Unit = {
    fallbacksC.incrementAndGet()
    reasons.addLast(reason)
    while (reasons.size > 100) reasons.pollFirst()
  }

  def plannedCandidates(): Long = plannedC.get
  def jobs(): Long = jobsC.get
  def fallbacks(): Long = fallbacksC.get
  def rowsReceived(): Long = rowsC.get
  def bytesReceived(): Long = bytesC.get
  def fallbackReasons(): java.util.List[String] = reasons.asScala.toList.asJava
  /** Destinations still buffered or listening in this JVM (0 when nothing leaked). */
  def openDestinations(): Int = ReceiverService.get.openDestinations
  def bufferedBytes(): Long = ReceiverService.get.bufferedBytes
  /** Live threads of the receiver service in this JVM. */
  def receiverThreads(): Int = Thread.getAllStackTraces.keySet.asScala.count(_.getName.startsWith("jumpgate-"))

  def reset(): Unit = Seq(plannedC, jobsC, fallbacksC, rowsC, bytesC).foreach(_.set(0))
}
