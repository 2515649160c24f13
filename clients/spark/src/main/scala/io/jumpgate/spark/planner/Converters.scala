package io.jumpgate.spark.planner

import java.net.URI
import java.nio.file.Paths

import scala.jdk.OptionConverters._
import scala.util.control.NonFatal

import io.jumpgate.core.client.Capabilities
import io.jumpgate.core.request.{JsonObject, Op}
import io.jumpgate.spark.{JumpgateConf, JumpgateStats}
import io.jumpgate.spark.JumpgateConf.OperatorKeys

import org.apache.spark.sql.catalyst.expressions._
import scala.util.{Left, Right}
import org.apache.spark.sql.catalyst.expressions.aggregate._
import org.apache.spark.sql.catalyst.optimizer.{BuildLeft, BuildRight}
import org.apache.spark.sql.catalyst.plans._
import org.apache.spark.sql.execution.{FileSourceScanExec, FilterExec, ProjectExec, SparkPlan}
import org.apache.spark.sql.execution.aggregate.HashAggregateExec
import org.apache.spark.sql.execution.exchange.BroadcastExchangeExec
import org.apache.spark.sql.execution.joins.{BroadcastHashJoinExec, HashedRelationBroadcastMode}
import org.apache.spark.sql.types._

/** What converters share while planning one query. */
final class ConvertContext(val conf: JumpgateConf, val capabilities: Capabilities) {
  private var counter = 0
  /** A fresh operation name, unique in the query. */
  def fresh(prefix: String): String = { counter += 1; s"${prefix}$counter" }
  def translator(cols: Map[ExprId, String]): ExprTranslator = new ExprTranslator(cols, conf.allowIncompatible)
  /** Why the server cannot run operation `kind` (GET /v1/ncas), if it cannot. */
  def missing(kind: String): Option[Why] = capabilities.missing(kind).toScala.map(Why(_))
}

/**
 * One small converter per Spark operator (the DataFusion Comet habit): given the node and its
 * already-converted children, it answers with a [[Frag]] (supported) or a [[Why]] (unsupported or
 * incompatible, with the reason EXPLAIN shows). See docs/spark-design.md, "Adding a new operator".
 */
trait OperatorConverter {
  /** The per-operator switch: spark.jumpgate.<key>.enabled */
  def key: String
  /** The contract operation kind this converter emits (checked against GET /v1/ncas). */
  def operation: String
  def matches(node: SparkPlan): Boolean
  /** The node's inputs that must be offloaded too (a join's build side is under its broadcast). */
  def offloadedInputs(node: SparkPlan): Seq[SparkPlan] = node.children
  def convert(node: SparkPlan, children: Seq[Frag], ctx: ConvertContext): Either[Why, Frag]
}

object Converters {
  val all: Seq[OperatorConverter] =
    Seq(FileScanConverter, FilterConverter, ProjectConverter, BroadcastHashJoinConverter, PartialAggregateConverter)

  def forNode(node: SparkPlan): Option[OperatorConverter] = all.find(_.matches(node))

  def colName(id: ExprId): String = s"x${id.id}"
  def quoted(id: ExprId): String = ExprTranslator.ident(colName(id))

  private[planner] def sequence[A](xs: Seq[Either[Why, A]]): Either[Why, Seq[A]] =
    xs.collectFirst { case Left(w) => w } match {
      case Some(w) => Left(w)
      case None => Right(xs.map(_.toOption.get))
    }

  /** `{"name", "expr"}` columns that give each attribute its `x<exprId>` name. */
  private[planner] def columnsFor(attrs: Seq[Attribute], exprs: Seq[String]): Seq[JsonObject] =
    attrs.zip(exprs).map { case (a, e) => Req.obj("name" -> colName(a.exprId), "expr" -> e) }
}

import Converters._

/** File scans over JSON Lines, ORC and Parquet files under the server's data root (spark.jumpgate.dataRoot,
 *  or what the server says when that is unset). */
object FileScanConverter extends OperatorConverter {
  val key = "scan"
  val operation = "read"
  def matches(node: SparkPlan): Boolean = node.isInstanceOf[FileSourceScanExec]

  /** Reader options that only choose which files are read (Spark's file index applies them when it
   *  lists the files the request names), lower-cased as the check below compares them. */
  private val FileSelectionOptions = Set("path", "paths", "pathglobfilter", "recursivefilelookup",
    "modifiedbefore", "modifiedafter")

  private def format(scan: FileSourceScanExec): Option[(String, String)] =
    scan.relation.fileFormat.toString.toLowerCase match {
      case "json" => Some(("json", OperatorKeys.ScanJson))
      case "orc" => Some(("orc", OperatorKeys.ScanOrc))
      case "parquet" => Some(("parquet", OperatorKeys.ScanParquet))
      case _ => None
    }

  /** The file bytes [[convert]] would count for `scan` (0 for a partitioned table, which is never
   *  offloaded), from Spark's file index, which has the files' sizes in memory: nothing is opened. */
  def inputBytes(scan: FileSourceScanExec): Long =
    if (scan.relation.partitionSchema.nonEmpty) 0L
    else try scan.relation.location.listFiles(Nil, Nil).iterator.flatMap(_.files).map(_.getLen).sum catch {
      case NonFatal(_) => Long.MaxValue // unknown: the full planning decides (and says why)
    }

  def convert(node: SparkPlan, children: Seq[Frag], ctx: ConvertContext): Either[Why, Frag] = {
    val scan = node.asInstanceOf[FileSourceScanExec]
    val (fmt, switch) = format(scan) match {
      case Some(f) => f
      case None => return Left(Why(s"file format ${scan.relation.fileFormat} is not offloaded (JSON, ORC, Parquet are)"))
    }
    if (!ctx.conf.operatorEnabled(switch)) return Left(Why(s"spark.jumpgate.$switch.enabled is false"))
    ctx.missing("read") match {
      case Some(w) => return Left(w)
      case None =>
    }
    if (scan.relation.partitionSchema.nonEmpty) return Left(Why("partitioned table (partition columns are not offloaded)"))
    if (scan.bucketedScan) return Left(Why("bucketed scan"))
    if (fmt == "json") {
      // Options that choose files are applied by the file index listed below; the others change parsing.
      val opts = scan.relation.options.keySet.map(_.toLowerCase) -- FileSelectionOptions
      if (opts.nonEmpty) return Left(Why(s"JSON reader options ${opts.toSeq.sorted.mkString(", ")}"))
    }
    val root = ctx.conf.dataRootOrWhy match {
      case Right(r) => Paths.get(r).toAbsolutePath.normalize()
      case Left(why) => return Left(Why(why))
    }
    JumpgateStats.scanConverted()
    val files = try {
      scan.relation.location.listFiles(Nil, Nil).flatMap(_.files).map { f =>
        val p = f.getPath.toUri
        if (p.getScheme != null && p.getScheme != "file") return Left(Why(s"file $p is not on the local file system"))
        val abs = Paths.get(new URI("file", null, p.getPath, null)).toAbsolutePath.normalize()
        if (!abs.startsWith(root)) return Left(Why(s"file $abs is outside ${JumpgateConf.DATA_ROOT}=$root"))
        FileRef(root.relativize(abs).toString, f.getLen)
      }.sortBy(_.path)
    } catch {
      case NonFatal(e) => return Left(Why(s"cannot list the table's files: $e"))
    }
    if (files.isEmpty) return Left(Why("the table has no files"))
    val schema = scan.requiredSchema
    if (schema.isEmpty) return Left(Why("reads no columns"))
    val attrs = scan.output
    if (attrs.exists(a => !schema.fieldNames.contains(a.name))) return Left(Why("metadata columns"))
    val columns = sequence(schema.fields.toSeq.map { f =>
      Types.contractType(f.dataType).left.map(w => Why(s"column ${f.name}: ${w.message}"))
        .map(t => Req.obj("name" -> f.name, "type" -> t))
    }) match {
      case Left(w) => return Left(w)
      case Right(c) => c
    }
    val name = ctx.fresh("scan")
    val table = scan.tableIdentifier.map(_.table).getOrElse(files.head.path)
    val op = Req.op("read", name, Nil, Seq("path" -> files.map(_.path), "format" -> fmt, "schema" -> columns))
    val cols = attrs.map(a => a.exprId -> ExprTranslator.ident(a.name)).toMap
    val largest = root.resolve(files.maxBy(_.bytes).path)
    val (rows, stringBytes) = Estimates.scanRows(fmt, files.map(_.bytes).sum, largest, scan.relation.dataSchema)
    Right(Frag(node, "scan", Nil, Seq(op), name, cols, Some(ScanInfo(fmt, table, files, rows, stringBytes)),
      label = s"Scan $fmt $table"))
  }
}

object FilterConverter extends OperatorConverter {
  val key = OperatorKeys.Filter
  val operation = "filter"
  def matches(node: SparkPlan): Boolean = node.isInstanceOf[FilterExec]

  def convert(node: SparkPlan, children: Seq[Frag], ctx: ConvertContext): Either[Why, Frag] = {
    val f = node.asInstanceOf[FilterExec]
    val child = children.head
    ctx.translator(child.cols)(f.condition).map { cond =>
      val name = ctx.fresh("filter")
      Frag(node, "filter", children, Seq(Req.op("filter", name, Seq("input" -> child.top), Seq("condition" -> cond))),
        name, child.cols, label = "Filter")
    }
  }
}

object ProjectConverter extends OperatorConverter {
  val key = OperatorKeys.Project
  val operation = "project"
  def matches(node: SparkPlan): Boolean = node.isInstanceOf[ProjectExec]

  def convert(node: SparkPlan, children: Seq[Frag], ctx: ConvertContext): Either[Why, Frag] = {
    val p = node.asInstanceOf[ProjectExec]
    val child = children.head
    val tr = ctx.translator(child.cols)
    sequence(p.projectList.map { ne =>
      tr(ne).flatMap { text =>
        ne match {
          case _: Attribute => Right(text)
          case _ => Types.contractType(ne.dataType).map(t => s"CAST($text AS $t)")
        }
      }
    }).map { exprs =>
      val name = ctx.fresh("project")
      val attrs = p.output
      Frag(node, "project", children,
        Seq(Req.op("project", name, Seq("input" -> child.top), Seq("columns" -> columnsFor(attrs, exprs)))),
        name, attrs.map(a => a.exprId -> quoted(a.exprId)).toMap, label = "Project")
    }
  }
}

/** Broadcast hash joins: the probe (streamed) side and the build side under its broadcast. */
object BroadcastHashJoinConverter extends OperatorConverter {
  val key = OperatorKeys.Join
  val operation = "join"
  def matches(node: SparkPlan): Boolean = node.isInstanceOf[BroadcastHashJoinExec]

  private def buildInput(p: SparkPlan): SparkPlan = p match {
    case b: BroadcastExchangeExec => b.child
    case other => other
  }

  override def offloadedInputs(node: SparkPlan): Seq[SparkPlan] = {
    val j = node.asInstanceOf[BroadcastHashJoinExec]
    j.children.map(buildInput)
  }

  def convert(node: SparkPlan, children: Seq[Frag], ctx: ConvertContext): Either[Why, Frag] = {
    val j = node.asInstanceOf[BroadcastHashJoinExec]
    val buildPlan = j.buildSide match { case BuildLeft => j.left; case BuildRight => j.right }
    buildPlan match {
      case b: BroadcastExchangeExec if b.mode.isInstanceOf[HashedRelationBroadcastMode] =>
      case b: BroadcastExchangeExec => return Left(Why(s"broadcast mode ${b.mode}"))
      case other => return Left(Why(s"build side ${other.nodeName} is not a broadcast exchange (already materialized)"))
    }
    if (j.isNullAwareAntiJoin) return Left(Why("null-aware anti join (NOT IN)"))
    val (jgType, probeIdx) = (j.joinType, j.buildSide) match {
      case (Inner, BuildRight) => ("inner", 0)
      case (Inner, BuildLeft) => ("inner", 1)
      case (LeftOuter, BuildRight) => ("left_outer", 0)
      case (RightOuter, BuildLeft) => ("left_outer", 1)
      case (LeftSemi, BuildRight) => ("left_semi", 0)
      case (LeftAnti, BuildRight) => ("left_anti", 0)
      case (t, s) => return Left(Why(s"join type ${t.sql} with build side $s"))
    }
    val probe = children(probeIdx)
    var build = children(1 - probeIdx)
    var extraOps = Seq.empty[Op]
    // Column names must not clash across the sides: rename the build side when they would.
    if (build.cols.values.toSet.intersect(probe.cols.values.toSet).nonEmpty) {
      val name = ctx.fresh("rename")
      val attrs = build.output
      val op = Req.op("project", name, Seq("input" -> build.top),
        Seq("columns" -> columnsFor(attrs, attrs.map(a => build.cols(a.exprId)))))
      extraOps = Seq(op)
      build = build.copy(top = name, cols = attrs.map(a => a.exprId -> quoted(a.exprId)).toMap)
    }
    val (probeKeys, buildKeys) = if (probeIdx == 0) (j.leftKeys, j.rightKeys) else (j.rightKeys, j.leftKeys)
    val both = probe.cols ++ build.cols
    for {
      pk <- sequence(probeKeys.map(ctx.translator(probe.cols)(_)))
      bk <- sequence(buildKeys.map(ctx.translator(build.cols)(_)))
      cond <- j.condition match {
        case Some(c) => ctx.translator(both)(c).map(Some(_))
        case None => Right(None)
      }
      _ <- sequence(probeKeys.map(k => Types.contractType(k.dataType).left.map(w => Why(s"join key: ${w.message}"))))
    } yield {
      val name = ctx.fresh("join")
      val attrs = j.output
      val body = Seq("build_keys" -> bk, "probe_keys" -> pk, "type" -> jgType) ++
        cond.map(c => "condition" -> c).toSeq ++
        Seq("columns" -> columnsFor(attrs, attrs.map(a => both(a.exprId))))
      val ordered = if (probeIdx == 0) Seq(probe, build) else Seq(build, probe)
      // The renaming project belongs to the build side's own ops.
      val kids = ordered.map(f => if (extraOps.nonEmpty && (f eq build)) f.copy(ops = f.ops ++ extraOps) else f)
      Frag(node, "join", kids, Seq(Req.op("join", name, Seq("build" -> build.top, "probe" -> probe.top), body)),
        name, attrs.map(a => a.exprId -> quoted(a.exprId)).toMap, drivingChild = probeIdx,
        label = s"BroadcastHashJoin $jgType")
    }
  }
}

/**
 * The partial side of a hash aggregation: Jumpgate computes partial states and a projection gives
 * them exactly the layout of Spark's aggregation buffers, so Spark's final aggregation merges them.
 */
object PartialAggregateConverter extends OperatorConverter {
  val key = OperatorKeys.Aggregate
  val operation = "aggregate"
  def matches(node: SparkPlan): Boolean = node match {
    case h: HashAggregateExec => h.aggregateExpressions.forall(_.mode == Partial)
    case _ => false
  }

  /** (contract aggregates, expressions of the Spark buffer columns over the aggregate's output). */
  private def lowerFunction(ae: AggregateExpression, i: Int, tr: ExprTranslator, ctx: ConvertContext)
      : Either[Why, (Seq[JsonObject], Seq[String])] = {
    if (ae.isDistinct) return Left(Why("DISTINCT aggregate"))
    if (ae.filter.isDefined) return Left(Why("aggregate with FILTER"))
    val a = s"a$i"
    val ref = ExprTranslator.ident(a)
    def cast(text: String, dt: DataType): Either[Why, String] = Types.contractType(dt).map(t => s"CAST($text AS $t)")
    def one(fn: String, e: Expression): Either[Why, Seq[JsonObject]] =
      tr(e).map(x => Seq(Req.obj("name" -> a, "fn" -> fn, "expr" -> x)))
    def floatOrder(e: Expression): Either[Why, Unit] =
      if (e.dataType == DoubleType && !ctx.conf.allowIncompatible)
        Left(Why("sum of float64 values (the order of additions differs)", incompatible = true))
      else Right(())
    /** The aggregate over `e` in Spark's buffer type `buffer`: a buffer wider than 18 digits (a sum
     *  of decimal(p,s) buffers in decimal(p+10,s)) gets its input widened to it, so that Jumpgate adds
     *  in 38 digits (a wide decimal's sum is decimal(38,s)); the buffer's CAST below brings the
     *  result to Spark's precision, failing the job (and so falling back to Spark) should it not fit. */
    def widened(fn: String, e: Expression, buffer: DecimalType): Either[Why, Seq[JsonObject]] =
      if (buffer.precision <= Types.MaxDecimalPrecision) one(fn, e)
      else for (x <- tr(e); t <- Types.contractType(buffer)) // the input's scale: Spark keeps it
        yield Seq(Req.obj("name" -> a, "fn" -> fn, "expr" -> s"CAST($x AS $t)"))
    ae.aggregateFunction match {
      case s: Sum =>
        s.dataType match {
          case d: DecimalType =>
            for (aggs <- widened("sum", s.child, d); sum <- cast(s"coalesce($ref, 0)", d))
              yield (aggs, Seq(sum, s"($ref IS NULL)"))
          case dt =>
            for (_ <- floatOrder(s.child); aggs <- one("sum", s.child); sum <- cast(ref, dt)) yield (aggs, Seq(sum))
        }
      case c: Count if c.children.size == 1 && c.children.head.foldable && !c.children.head.nullable =>
        Right((Seq(Req.obj("name" -> a, "fn" -> "count_star")), Seq(ref)))
      case c: Count if c.children.size == 1 => one("count", c.children.head).map(x => (x, Seq(ref)))
      case _: Count => Left(Why("count of several expressions"))
      case m: Min => for (aggs <- one("min", m.child); v <- cast(ref, m.dataType)) yield (aggs, Seq(v))
      case m: Max => for (aggs <- one("max", m.child); v <- cast(ref, m.dataType)) yield (aggs, Seq(v))
      case av: Average =>
        val sumRef = ExprTranslator.ident(s"${a}__sum")
        val cntRef = ExprTranslator.ident(s"${a}__count")
        for {
          _ <- floatOrder(av.child)
          aggs <- av.sumDataType match {
            case d: DecimalType => widened("avg", av.child, d)
            case _ => one("avg", av.child)
          }
          sum <- cast(s"coalesce($sumRef, 0)", av.sumDataType)
        } yield (aggs, Seq(sum, cntRef))
      case other => Left(Why(s"aggregate function ${other.prettyName}"))
    }
  }

  def convert(node: SparkPlan, children: Seq[Frag], ctx: ConvertContext): Either[Why, Frag] = {
    val h = node.asInstanceOf[HashAggregateExec]
    val child = children.head
    val tr = ctx.translator(child.cols)
    val groups = sequence(h.groupingExpressions.map(g => tr(g).flatMap(x =>
      Types.contractType(g.dataType).map(t => Req.obj("name" -> colName(g.exprId), "expr" -> s"CAST($x AS $t)")))))
    val funcs = sequence(h.aggregateExpressions.zipWithIndex.map { case (ae, i) => lowerFunction(ae, i, tr, ctx) })
    for {
      gs <- groups
      fs <- funcs
      _ <- if (h.output.size == gs.size + fs.map(_._2.size).sum) Right(())
           else Left(Why("partial aggregate output does not match its buffers"))
    } yield {
      val aggName = ctx.fresh("aggregate")
      val projName = ctx.fresh("partial")
      val attrs = h.output
      val groupExprs = h.groupingExpressions.map(g => quoted(g.exprId))
      val bufferExprs = fs.flatMap(_._2)
      val aggOp = Req.op("aggregate", aggName, Seq("input" -> child.top),
        Seq("group_by" -> gs, "aggregates" -> fs.flatMap(_._1), "mode" -> "partial"))
      val projOp = Req.op("project", projName, Seq("input" -> aggName),
        Seq("columns" -> columnsFor(attrs, groupExprs ++ bufferExprs)))
      Frag(node, "aggregate", children, Seq(aggOp, projOp), projName,
        attrs.map(a => a.exprId -> quoted(a.exprId)).toMap, label = "HashAggregate partial")
    }
  }
}
