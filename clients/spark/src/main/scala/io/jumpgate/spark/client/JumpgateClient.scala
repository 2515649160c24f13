package io.jumpgate.spark.client

import java.io.IOException
import java.net.URI
import java.net.http.{HttpClient, HttpRequest, HttpResponse}
import java.time.Duration
import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

import io.jumpgate.spark.JumpgateStats

/** The server could not be reached at all (connection refused, timeout). */
final class ServerUnreachable(message: String, cause: Throwable) extends IOException(message, cause)

/** The server answered with an error status: `operation` is the request operation it names, if any. */
final class RequestRejected(val status: Int, val message: String, val operation: Option[String], val body: String)
    extends IOException(s"HTTP $status: $message")

/** What one `send` destination will receive (POST /v1/jobs, `outputs`). */
final case class OutputInfo(name: String, layout: JsonNode, layoutJson: String, expectedStreams: Int)

final case class CompiledJob(jobId: String, outputs: Map[String, OutputInfo], answer: JsonNode)

final case class JobStatus(state: String, error: Option[String]) {
  def terminal: Boolean = Set("succeeded", "failed", "cancelled").contains(state)
}

/** A small client of the REST API (contract section 4), on the JDK's HTTP client. `token`: the bearer
 *  token of a server with tenants (docs/security.md). */
final class JumpgateClient(val url: String, timeoutMs: Long, token: Option[String] = None) {
  import JumpgateClient._

  private def request(method: String, path: String, body: Option[String], timeout: Long = timeoutMs): JsonNode = {
    val b = HttpRequest.newBuilder(URI.create(url + path)).timeout(Duration.ofMillis(timeout))
      .header("Content-Type", "application/json")
    token.foreach(t => b.header("Authorization", s"Bearer $t"))
    body match {
      case Some(text) => b.method(method, HttpRequest.BodyPublishers.ofString(text))
      case None => b.method(method, HttpRequest.BodyPublishers.noBody())
    }
    val resp = try http.send(b.build(), HttpResponse.BodyHandlers.ofString()) catch {
      case e: IOException => throw new ServerUnreachable(s"$method $path: cannot reach the Jumpgate server at $url: $e", e)
      case e: InterruptedException => throw e
    }
    val text = Option(resp.body()).getOrElse("")
    val json = try { if (text.isEmpty) mapper.createObjectNode() else mapper.readTree(text) } catch {
      case NonFatal(_) => mapper.createObjectNode().put("message", text.take(500))
    }
    if (resp.statusCode() >= 400) {
      val err = if (json.has("error")) json.get("error") else json
      val msg = Option(err.get("message")).map(_.asText).getOrElse(text.take(500))
      val op = Option(err.get("operation")).filter(_.isTextual).map(_.asText)
      throw new RequestRejected(resp.statusCode(), msg, op, text)
    }
    json
  }

  def submit(requestJson: String): CompiledJob = {
    val a = request("POST", "/v1/jobs", Some(requestJson))
    val outs = Option(a.get("outputs")).map(_.fields().asScala.map { e =>
      val o = e.getValue
      e.getKey -> OutputInfo(e.getKey, o.get("layout"), mapper.writeValueAsString(o.get("layout")),
        Option(o.get("expected_streams")).map(_.asInt).getOrElse(1))
    }.toMap).getOrElse(Map.empty)
    CompiledJob(a.get("job_id").asText, outs, a)
  }

  def execute(jobId: String): Unit = request("POST", s"/v1/jobs/$jobId/execute", None)

  def status(jobId: String, waitS: Double): JobStatus = {
    val path = if (waitS > 0) f"/v1/jobs/$jobId?wait=$waitS%.3f" else s"/v1/jobs/$jobId"
    val a = request("GET", path, None, timeoutMs + (waitS * 1000).toLong)
    val err = Option(a.get("error")).filterNot(_.isNull).map(e => Option(e.get("message")).map(_.asText).getOrElse(e.toString))
    JobStatus(a.get("state").asText, err)
  }

  def cancelQuietly(jobId: String): Unit = try request("DELETE", s"/v1/jobs/$jobId", None) catch { case NonFatal(_) => }

  /** The directory the server's nodes resolve a read's relative paths in, as the server tells its
   *  clients: the `data_root` GET /v1/nodes gives each node, when all nodes have the same one (an
   *  authenticated call: a data root is not for anonymous callers, so GET /v1/health does not say
   *  it). Left: why the server does not say (its nodes' data roots differ). */
  def dataRoot(): Either[String, String] = {
    val roots = request("GET", "/v1/nodes", None).elements().asScala
      .map(n => Option(n.get("data_root")).filter(_.isTextual).map(_.asText)).toSeq
    roots.distinct match {
      case Seq(Some(root)) => Right(root)
      case Seq() => Left(s"the server at $url lists no nodes")
      case _ => Left(s"the server at $url has nodes with different data roots (GET /v1/nodes: ${roots.map(_.getOrElse("?")).distinct.mkString(", ")})")
    }
  }

  /** GET /v1/ncas: the operation kinds some registered NCA can run. */
  def operations(): Set[String] = {
    val a = request("GET", "/v1/ncas", None)
    a.elements().asScala.flatMap(n => Option(n.get("operations")).toSeq.flatMap(_.elements().asScala.map(_.asText))).toSet
  }
}

object JumpgateClient {
  val mapper = new ObjectMapper()
  private lazy val http: HttpClient = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5))
    .version(HttpClient.Version.HTTP_1_1).build()

  private val clients = new ConcurrentHashMap[(String, Long, Option[String]), JumpgateClient]()
  def apply(url: String, timeoutMs: Long, token: Option[String] = None): JumpgateClient =
    clients.computeIfAbsent((url, timeoutMs, token), k => new JumpgateClient(k._1, k._2, k._3))

  private val RetryMs = 5000L
  private val dataRoots = new ConcurrentHashMap[String, Either[String, String]]()
  private val dataRootFailures = new ConcurrentHashMap[String, (Long, String)]()

  /** The data root of the server at `url` ([[JumpgateClient.dataRoot]]), asked once per server and
   *  kept for the life of the JVM (when spark.jumpgate.dataRoot is unset). A server that cannot be
   *  reached is asked again after a few seconds, not on every scan of every plan. */
  def serverDataRoot(url: String, timeoutMs: Long, token: Option[String]): Either[String, String] = {
    val known = dataRoots.get(url)
    if (known != null) return known
    val now = System.currentTimeMillis()
    val failed = dataRootFailures.get(url)
    if (failed != null && now - failed._1 < RetryMs) return Left(failed._2)
    JumpgateStats.dataRootLookup()
    try {
      val answer = apply(url, timeoutMs, token).dataRoot()
      dataRoots.put(url, answer)
      dataRootFailures.remove(url)
      answer
    } catch {
      case NonFatal(e) =>
        val why = s"cannot ask the server at $url: ${e.getMessage}"
        dataRootFailures.put(url, (now, why))
        Left(why)
    }
  }

  /** Forget the servers' data roots (tests). */
  def forgetDataRoots(): Unit = { dataRoots.clear(); dataRootFailures.clear() }
}
