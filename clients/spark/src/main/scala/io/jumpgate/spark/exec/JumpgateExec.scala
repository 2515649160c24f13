package io.jumpgate.spark.exec

import scala.util.control.NonFatal

import io.jumpgate.spark.{JumpgateConf, JumpgateStats}
import io.jumpgate.spark.planner._

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.physical.{Partitioning, UnknownPartitioning}
import org.apache.spark.sql.execution.{ApplyColumnarRulesAndInsertTransitions, CollapseCodegenStages, LeafExecNode, SparkPlan}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}

/**
 * A subtree of Spark operators that runs as one Jumpgate job.
 *
 * `original` is the Spark subtree it replaces. It is not a child (Spark never plans or runs it)
 * but it is kept: when Jumpgate is unreachable, rejects the request, or the job or one of its
 * streams fails, [[doExecute]] logs a warning, counts a fallback, and runs `original` instead.
 * Because a job's output is buffered whole before Spark reads a row (see [[JumpgateRunner]]), a
 * fallback never mixes rows of both.
 */
case class JumpgateExec(output: Seq[Attribute], @transient frag: Frag, @transient original: SparkPlan,
                        settings: Map[String, String]) extends LeafExecNode {

  override def nodeName: String = "JumpgateExec"

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "numOutputRows" -> SQLMetrics.createMetric(sparkContext, "number of output rows"),
    "jgRows" -> SQLMetrics.createMetric(sparkContext, "rows received from Jumpgate"),
    "jgBytes" -> SQLMetrics.createSizeMetric(sparkContext, "bytes received from Jumpgate"),
    "jgTime" -> SQLMetrics.createTimingMetric(sparkContext, "time in Jumpgate"),
    "jgJobs" -> SQLMetrics.createMetric(sparkContext, "Jumpgate jobs"),
    "fallbacks" -> SQLMetrics.createMetric(sparkContext, "fallbacks to Spark"))

  def conf: JumpgateConf = JumpgateConf(settings.get)

  /** The Spark operators this node runs on Jumpgate, bottom-up. */
  def offloaded: Seq[SparkPlan] = if (frag == null) Nil else frag.allFrags.map(_.node)

  def describe: String = if (frag == null) "?" else frag.describe

  override def simpleString(maxFields: Int): String = s"JumpgateExec [$describe]"

  override def verboseStringWithOperatorId(): String = {
    val ops = if (frag == null) "" else frag.allOps.map(o => s"${o.kind} ${o.name}").mkString(", ")
    s"""$formattedNodeName
       |Offloaded: $describe
       |Operations: $ops
       |Output: ${output.mkString("[", ", ", "]")}
       |""".stripMargin
  }

  override def outputPartitioning: Partitioning = UnknownPartitioning(0)

  override protected def doExecute(): RDD[InternalRow] = {
    try JumpgateRunner.run(this, conf) catch {
      case NonFatal(e) =>
        metrics("fallbacks") += 1
        JumpgateStats.fallback(s"$describe: ${e.getMessage}")
        logWarning(s"Jumpgate: running [$describe] in Spark instead: ${e.getMessage}")
        JumpgateRunner.postDriverMetrics(sparkContext, metrics.values.toSeq)
        JumpgateExec.prepareFallback(original).execute()
    }
  }

  override protected def doCanonicalize(): SparkPlan =
    JumpgateExec(output.map(org.apache.spark.sql.catalyst.expressions.QueryPlan.normalizeExpressions(_, output)
      .asInstanceOf[Attribute]), frag, if (original == null) null else original.canonicalized, Map.empty)
}

object JumpgateExec {
  /** Make a kept Spark subtree runnable on its own (columnar transitions, whole-stage codegen). */
  def prepareFallback(plan: SparkPlan): SparkPlan = {
    val rules = Seq(ApplyColumnarRulesAndInsertTransitions(Nil, false), CollapseCodegenStages())
    rules.foldLeft(plan)((p, r) => r.apply(p))
  }

  /**
   * The contract request for a candidate: one copy of its operations per destination group
   * (suffix `_g<k>`), the driving scan of copy k reading the files of group k, each copy ending in
   * a projection to Spark's output types (`c0`, `c1`, ...) and a `send` to destination k.
   */
  def buildRequest(frag: Frag, groups: Seq[Seq[FileRef]], sends: Seq[(String, Int)], name: String): Request = {
    val base = frag.allOps
    val drivingRead = frag.drivingScan.top
    val resultCols = frag.output.zipWithIndex.map { case (a, i) =>
      val t = Types.contractType(a.dataType).getOrElse(throw new IllegalStateException(s"output type ${a.dataType}"))
      JsonObject("name" -> s"c$i", "expr" -> s"CAST(${frag.cols(a.exprId)} AS $t)")
    }
    val result = Op("project", "result", Seq("input" -> frag.top), Seq("columns" -> resultCols))
    val ops = groups.indices.flatMap { k =>
      val send = Op("send", "out", Seq("input" -> "result"),
        Seq("transport" -> "tcp", "host" -> sends(k)._1, "port" -> sends(k)._2))
      (base :+ result :+ send).map { op =>
        val r = op.renamed(n => s"${n}_g$k")
        if (op.name == drivingRead) r.withBody("path", groups(k).map(_.path)) else r
      }
    }
    Request(name, ops)
  }

  /** Split files into `k` groups of similar total size (largest first, each to the lightest group). */
  def balance(files: Seq[FileRef], k: Int): Seq[Seq[FileRef]] = {
    val groups = Array.fill(math.max(1, math.min(k, files.size)))(Vector.empty[FileRef])
    val sizes = Array.fill(groups.length)(0L)
    files.sortBy(f => (-f.bytes, f.path)).foreach { f =>
      val i = sizes.indices.minBy(sizes)
      groups(i) = groups(i) :+ f
      sizes(i) += f.bytes
    }
    groups.toSeq.map(_.sortBy(_.path))
  }
}
