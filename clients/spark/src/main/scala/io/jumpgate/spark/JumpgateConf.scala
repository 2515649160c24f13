package io.jumpgate.spark

import java.util.Locale

import org.apache.spark.network.util.JavaUtils

import io.jumpgate.core.client.JumpgateClient
import org.apache.spark.sql.internal.SQLConf

/**
 * The `spark.jumpgate.*` settings (documented in docs/spark.md). They are read from the session's
 * SQL configuration at planning time, so `spark.conf.set(...)` changes them for the next query;
 * values given to SparkConf at start-up are the session defaults.
 */
final case class JumpgateConf(get: String => Option[String]) {
  import JumpgateConf._

  private def bool(key: String, default: Boolean): Boolean =
    get(key).map(_.trim.toLowerCase(Locale.ROOT)).map(v => v == "true" || v == "1").getOrElse(default)
  private def str(key: String, default: String): String = get(key).map(_.trim).getOrElse(default)
  private def bytes(key: String, default: String): Long = JavaUtils.byteStringAsBytes(str(key, default))
  private def dbl(key: String, default: Double): Double = get(key).map(_.trim.toDouble).getOrElse(default)
  private def int(key: String, default: Int): Int = get(key).map(_.trim.toInt).getOrElse(default)

  /** The master switch. */
  def enabled: Boolean = bool(ENABLED, default = true)
  def url: String = str(URL, "http://127.0.0.1:8470").stripSuffix("/")
  /** The bearer token of a server with tenants (docs/security.md); else the environment's JUMPGATE_TOKEN. */
  def token: Option[String] = get(TOKEN).orElse(sys.env.get("JUMPGATE_TOKEN")).map(_.trim).filter(_.nonEmpty)
  /** The local path of the server's data root: files under it are offloadable. Unset, the server
   *  says it (GET /v1/nodes `data_root`, fetched once per server: [[JumpgateClient.serverDataRoot]]). */
  def dataRoot: Option[String] = dataRootOrWhy.toOption
  /** [[dataRoot]], or why there is none (unset, and the server did not say). */
  def dataRootOrWhy: Either[String, String] = get(DATA_ROOT).map(_.trim).filter(_.nonEmpty) match {
    case Some(root) => Right(root)
    case None =>
      val answer = JumpgateClient.serverDataRoot(url, httpTimeoutMs, token.orNull)
      if (answer.known) Right(answer.root) else Left(s"$DATA_ROOT is not set and the server's data root is unknown: ${answer.why}")
  }
  /** Where executors listen for NTF streams (the address NCAs connect to). */
  def listenAddress: String = str(LISTEN_ADDRESS, "127.0.0.1")

  def thresholdEnabled: Boolean = bool(THRESHOLD_ENABLED, default = true)
  /** T of thesis section 3.5.2: bytes per core a job must read (one dataset) to be offloaded. */
  def thresholdBytesPerCore: Long = bytes(THRESHOLD, "48m")

  def scoringEnabled: Boolean = bool(SCORING_ENABLED, default = true)
  /** The smallest input/output byte ratio a candidate must reach per Spark<->Jumpgate boundary. */
  def minReductionPerBoundary: Double = dbl(MIN_REDUCTION, 1.5)

  def allowIncompatible: Boolean = bool(ALLOW_INCOMPATIBLE, default = false)
  def validateAtPlanning: Boolean = bool(VALIDATE, default = true)
  /** Jumpgate destinations (Spark partitions) per job; 0 means the default parallelism. */
  def maxStreams: Int = int(MAX_STREAMS, 0)
  /** A single-file job spreads its output over several Spark partitions (a shuffle NCA) from this input size. */
  def spreadMinBytes: Long = bytes(SPREAD_MIN_BYTES, "16m")
  /** Start the jobs of all the query stages adaptive execution creates at once (not one by one). */
  def prefetch: Boolean = bool(PREFETCH, default = true)
  def jobTimeoutMs: Long = (dbl(JOB_TIMEOUT_S, 600.0) * 1000).toLong
  def httpTimeoutMs: Long = (dbl(HTTP_TIMEOUT_S, 60.0) * 1000).toLong
  def maxBufferBytes: Long = bytes(RECEIVER_MAX_BYTES, "4g")

  /** The per-operator switch of `op` (one of [[OperatorKeys]]). */
  def operatorEnabled(op: String): Boolean = bool(s"spark.jumpgate.$op.enabled", default = true)
}

object JumpgateConf {
  val ENABLED = "spark.jumpgate.enabled"
  val URL = "spark.jumpgate.url"
  val TOKEN = "spark.jumpgate.token"
  val DATA_ROOT = "spark.jumpgate.dataRoot"
  val LISTEN_ADDRESS = "spark.jumpgate.listenAddress"
  val THRESHOLD = "spark.jumpgate.threshold"
  val THRESHOLD_ENABLED = "spark.jumpgate.threshold.enabled"
  val SCORING_ENABLED = "spark.jumpgate.scoring.enabled"
  val MIN_REDUCTION = "spark.jumpgate.scoring.minReductionPerBoundary"
  val ALLOW_INCOMPATIBLE = "spark.jumpgate.allowIncompatible"
  val VALIDATE = "spark.jumpgate.validateAtPlanning"
  val MAX_STREAMS = "spark.jumpgate.maxStreams"
  val SPREAD_MIN_BYTES = "spark.jumpgate.shuffle.spreadMinBytes"
  val PREFETCH = "spark.jumpgate.prefetch"
  val JOB_TIMEOUT_S = "spark.jumpgate.jobTimeout"
  val HTTP_TIMEOUT_S = "spark.jumpgate.httpTimeout"
  val RECEIVER_MAX_BYTES = "spark.jumpgate.receiver.maxBufferBytes"

  /** Per-operator switches: `spark.jumpgate.<key>.enabled`. */
  object OperatorKeys {
    val ScanJson = "scan.json"
    val ScanOrc = "scan.orc"
    val ScanParquet = "scan.parquet"
    val Filter = "filter"
    val Project = "project"
    val Join = "join"
    val Aggregate = "aggregate"
    val Shuffle = "shuffle"
    val all: Seq[String] = Seq(ScanJson, ScanOrc, ScanParquet, Filter, Project, Join, Aggregate, Shuffle)
  }

  def fromSqlConf(conf: SQLConf): JumpgateConf = JumpgateConf(k => Option(conf.getConfString(k, null)))
}
