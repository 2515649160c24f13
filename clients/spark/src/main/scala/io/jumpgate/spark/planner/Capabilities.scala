package io.jumpgate.spark.planner

import java.util.concurrent.ConcurrentHashMap

import scala.util.control.NonFatal

import io.jumpgate.spark.JumpgateStats
import io.jumpgate.spark.client.JumpgateClient

/** What the server's NCAs can run (GET /v1/ncas), or why that is unknown. Cached for a few seconds
 *  per server, so planning a batch of queries asks once. */
final case class Capabilities(operations: Set[String], unreachable: Option[String]) {
  def missing(kind: String): Option[Why] = unreachable match {
    case Some(why) => Some(Why(why))
    case None if operations.contains(kind) => None
    case None => Some(Why(s"no NCA on the server runs '$kind' (GET /v1/ncas lists ${operations.toSeq.sorted.mkString(", ")})"))
  }
}

object Capabilities {
  private val TtlMs = 5000L
  private val cache = new ConcurrentHashMap[String, (Long, Capabilities)]()

  def of(client: JumpgateClient): Capabilities = {
    val now = System.currentTimeMillis()
    val hit = cache.get(client.url)
    if (hit != null && now - hit._1 < TtlMs) return hit._2
    JumpgateStats.capabilityLookup()
    val caps = try Capabilities(client.operations(), None) catch {
      case NonFatal(e) => Capabilities(Set.empty, Some(s"Jumpgate server unreachable: ${e.getMessage}"))
    }
    cache.put(client.url, (now, caps))
    caps
  }

  def invalidate(): Unit = cache.clear()

  /** Every operation of the contract (planning without asking the server). */
  val assumeAll: Capabilities =
    Capabilities(Set("read", "filter", "project", "join", "aggregate", "shuffle", "send"), None)
}
