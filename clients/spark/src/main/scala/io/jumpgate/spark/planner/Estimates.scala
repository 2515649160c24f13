package io.jumpgate.spark.planner

import java.io.{FileInputStream, IOException}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}
import java.util.concurrent.ConcurrentHashMap

import scala.util.control.NonFatal

import io.jumpgate.spark.JumpgateStats

import org.apache.spark.sql.catalyst.expressions._
import org.apache.spark.sql.catalyst.plans.{LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.execution.{FilterExec, SparkPlan}
import org.apache.spark.sql.execution.aggregate.HashAggregateExec
import org.apache.spark.sql.execution.joins.BroadcastHashJoinExec
import org.apache.spark.sql.types.{StringType, StructType}

/**
 * The estimates the boundary score weighs: how many rows, and how many NTF bytes, a candidate sends
 * back to Spark for the file bytes it reads.
 *
 * Spark's own size estimate does not answer this without table statistics: a file relation's
 * size is its file size, a filter keeps it whole, and it counts Spark's row format, not NTF (an
 * offloaded JSON scan that keeps every row still reduces its bytes several times: no key names, no
 * text numbers). So, in this order:
 *  - a node's row count from Spark's statistics where it has one (ANALYZE TABLE ... with the
 *    cost-based optimizer on);
 *  - rows of a JSON Lines scan: its file bytes over the bytes per line of a sample of its largest
 *    file's head (cached per file), and from the same sample the average size of each string
 *    column; ORC/Parquet: file bytes over the table's row width in Spark's default sizes (a rough
 *    figure: compression is not known);
 *  - filters: the classic selectivity heuristics per conjunct (equality 1/10, range 1/3, IS NOT
 *    NULL 0.95, LIKE 1/4, IN 1/10 a value, others 1/2);
 *  - broadcast joins (a fact probe, a dimension build): the probe's rows times the share of build
 *    rows its own filters keep; outer joins keep the probe's rows;
 *  - partial aggregation: one row per destination without grouping, else a tenth of its input;
 *  - bytes: the NTF width of the output (contract section 2: 8 bytes a field after the null
 *    vector, each string's bytes (sampled, else Spark's default of 20), the frame's 4-byte length).
 */
object Estimates {
  /** Bytes read from the head of a JSON Lines file to count its lines. */
  val SampleBytes: Int = 256 << 10
  /** Average string length assumed in NTF (Spark's default size of a string). */
  val StringBytes: Double = StringType.defaultSize.toDouble

  /** What the head of a JSON Lines file says: bytes per line, and the average UTF-8 bytes of each
   *  string field per line (a missing or NULL value counts 0, as it has no bytes in NTF). */
  final case class JsonSample(bytesPerRow: Double, stringBytes: Map[String, Double])

  private val samples = new ConcurrentHashMap[(String, Long, Long), JsonSample]()
  private val mapper = new com.fasterxml.jackson.databind.ObjectMapper()

  /** The sample of a JSON Lines file's first [[SampleBytes]] (cached per file, size and time). */
  def jsonSample(file: Path): Option[JsonSample] = try {
    val key = (file.toString, Files.size(file), Files.getLastModifiedTime(file).toMillis)
    Option(samples.get(key)).orElse {
      JumpgateStats.sampleRead()
      val buf = new Array[Byte](SampleBytes)
      val in = new FileInputStream(file.toFile)
      val n = try in.readNBytes(buf, 0, buf.length) finally in.close()
      val whole = n < buf.length // the sample is the whole file: its last line may lack the '\n'
      val strings = scala.collection.mutable.HashMap[String, Long]()
      var lines = 0
      var start = 0
      var i = 0
      while (i <= n) {
        if ((i < n && buf(i) == '\n') || (i == n && whole && i > start)) {
          lines += 1
          try {
            val it = mapper.readTree(buf, start, i - start).properties().iterator()
            while (it.hasNext) {
              val e = it.next()
              if (e.getValue.isTextual)
                strings(e.getKey) = strings.getOrElse(e.getKey, 0L) + e.getValue.textValue.getBytes(UTF_8).length
            }
          } catch { case NonFatal(_) => } // a malformed line only lacks its string sizes
          start = i + 1
        }
        i += 1
      }
      val sample = if (lines == 0) JsonSample(n.toDouble.max(1.0), Map.empty)
        else JsonSample(start.toDouble.max(1.0) / lines, strings.view.mapValues(_.toDouble / lines).toMap)
      if (samples.size > 100000) samples.clear()
      samples.put(key, sample)
      Some(sample)
    }
  } catch { case _: IOException | _: SecurityException => None }

  /** Estimated rows of a scan over `bytes` file bytes whose largest file is `largest`, and the
   *  average bytes of its string columns where known. */
  def scanRows(format: String, bytes: Long, largest: Path, schema: StructType): (Double, Map[String, Double]) = {
    val sample = if (format == "json") jsonSample(largest) else None
    val perRow = sample.map(_.bytesPerRow).getOrElse(math.max(1, schema.defaultSize).toDouble)
    (bytes / perRow, sample.map(_.stringBytes).getOrElse(Map.empty))
  }

  /** Spark's row count of a node, where its statistics have one (CBO with table statistics). */
  def sparkRows(node: SparkPlan): Option[Double] =
    try node.logicalLink.flatMap(_.stats.rowCount).map(_.toDouble) catch { case NonFatal(_) => None }

  /** Estimated output rows of a candidate; `destinations` bounds what a partial aggregate returns. */
  def rows(f: Frag, destinations: Int): Double = sparkRows(f.node).getOrElse {
    def child(i: Int) = rows(f.children(i), destinations)
    (f.kind, f.node) match {
      case ("scan", _) => f.scan.map(_.rows).getOrElse(0.0)
      case ("filter", fe: FilterExec) => child(0) * selectivity(fe.condition)
      case ("join", j: BroadcastHashJoinExec) =>
        val probe = child(f.drivingChild)
        val build = f.children(1 - f.drivingChild)
        val kept = math.min(1.0, rows(build, destinations) / math.max(1.0, rows(build.drivingScan, destinations)))
        val cond = j.condition.map(selectivity).getOrElse(1.0)
        j.joinType match {
          case LeftOuter | RightOuter => probe
          case LeftAnti => probe * math.max(0.05, 1.0 - kept)
          case LeftSemi => probe * kept
          case _ => probe * kept * cond
        }
      case ("aggregate", h: HashAggregateExec) =>
        val in = child(0)
        if (h.groupingExpressions.isEmpty) destinations.toDouble
        else math.min(in, math.max(destinations.toDouble, in / 10))
      case _ => if (f.children.isEmpty) 0.0 else child(f.drivingChild)
    }
  }

  /** The classic selectivity heuristics of a predicate (no column statistics). */
  def selectivity(e: Expression): Double = e match {
    case And(l, r) => selectivity(l) * selectivity(r)
    case Or(l, r) => val a = selectivity(l); val b = selectivity(r); a + b - a * b
    case Not(c) => 1.0 - selectivity(c)
    case IsNotNull(_) => 0.95
    case IsNull(_) => 0.05
    case _: EqualTo | _: EqualNullSafe => 0.1
    case In(_, list) => math.min(0.5, 0.1 * list.size)
    case s: InSet => math.min(0.5, 0.1 * s.hset.size)
    case _: LessThan | _: LessThanOrEqual | _: GreaterThan | _: GreaterThanOrEqual => 1.0 / 3
    case _: Like | _: StartsWith | _: EndsWith | _: Contains => 0.25
    case Literal(true, _) => 1.0
    case Literal(false, _) | Literal(null, _) => 0.0
    case _ => 0.5
  }

  /** NTF bytes of one tuple of `attrs`, with its frame length; `stringBytes` has the average size
   *  of the strings that come straight from a sampled scan column. */
  def ntfRowBytes(attrs: Seq[Attribute], stringBytes: Map[ExprId, Double] = Map.empty): Double = {
    val n = attrs.size
    val strings = attrs.filter(_.dataType.isInstanceOf[StringType]).map(a => stringBytes.getOrElse(a.exprId, StringBytes))
    4 + 8 * ((n + 63) / 64) + 8.0 * n + strings.sum
  }

  /** Estimated NTF bytes a candidate sends back. */
  def outputBytes(f: Frag, destinations: Int): Double = {
    // A column keeps its exprId from the scan up through filters, projections and joins.
    val sampled = f.allFrags.flatMap(x => x.scan.toSeq.flatMap(s => x.node.output.flatMap(a =>
      s.stringBytes.get(a.name).map(a.exprId -> _)))).toMap
    rows(f, destinations) * ntfRowBytes(f.output, sampled)
  }
}
