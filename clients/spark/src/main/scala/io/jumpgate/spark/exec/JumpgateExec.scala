package io.jumpgate.spark.exec

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.jumpgate.core.request.{Op, Request}
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
    "jgReruns" -> SQLMetrics.createMetric(sparkContext, "Jumpgate jobs re-run for a partition read again"),
    "fallbacks" -> SQLMetrics.createMetric(sparkContext, "fallbacks to Spark"))

  def jgConf: JumpgateConf = JumpgateConf(settings.get)

  def sc: org.apache.spark.SparkContext = sparkContext

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

  /** A job started ahead of execution (see [[prefetch]]), consumed by the next [[doExecute]]. */
  @transient private lazy val started =
    new java.util.concurrent.atomic.AtomicReference[scala.concurrent.Promise[RDD[InternalRow]]]()

  /**
   * Start this node's job now, in the background. Adaptive execution creates every stage of a
   * wave before it materializes them one after another, each stage's `doExecute` blocking on its
   * job; starting them all at stage creation lets their jobs run side by side. The outcome, a
   * buffered result or a failure, waits for `doExecute`, which still decides about the fallback.
   */
  def prefetch(): Unit = {
    val p = scala.concurrent.Promise[RDD[InternalRow]]()
    if (frag != null && started.compareAndSet(null, p)) {
      val t = new Thread(() => {
        try p.success(JumpgateRunner.run(this, jgConf)) catch { case e: Throwable => p.failure(e) }
      }, s"jumpgate-job-$id")
      t.setDaemon(true)
      t.start() // a new thread inherits the SQL execution id (Spark's local properties)
    }
  }

  override protected def doExecute(): RDD[InternalRow] = {
    val ahead = started.getAndSet(null)
    def outcome: RDD[InternalRow] =
      if (ahead != null) scala.concurrent.Await.result(ahead.future, scala.concurrent.duration.Duration.Inf)
      else JumpgateRunner.run(this, jgConf)
    try outcome catch {
      case NonFatal(e) =>
        metrics("fallbacks") += 1
        JumpgateStats.fallback(s"$describe: ${e.getMessage}")
        logWarning(s"Jumpgate: running [$describe] in Spark instead: ${e.getMessage}")
        JumpgateRunner.postDriverMetrics(sparkContext, metrics.values.toSeq)
        JumpgateExec.prepareFallback(original).execute()
    }
  }

  /** Two nodes that replace equal Spark subtrees are equal (so AQE reuses their exchanges). */
  override protected def doCanonicalize(): SparkPlan =
    JumpgateExec(output.map(org.apache.spark.sql.catalyst.plans.QueryPlan.normalizeExpressions(_, output)
      .asInstanceOf[Attribute]), null, if (original == null) null else original.canonicalized, Map.empty)
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
   *
   * With `spread` > 1 (one group only), a `shuffle` NCA spreads the single copy's output over
   * `spread` destinations instead (contract section 1, `shuffle`; keys: the first output columns).
   */
  def buildRequest(frag: Frag, groups: Seq[Seq[FileRef]], sends: Seq[(String, Int)], name: String,
                   spread: Int = 1): Request = {
    require(spread == 1 || (groups.size == 1 && sends.size == spread), "spread needs one group, one send per output")
    val base = frag.allOps
    val drivingRead = frag.drivingScan.top
    val resultCols = frag.output.zipWithIndex.map { case (a, i) =>
      val t = Types.contractType(a.dataType).getOrElse(throw new IllegalStateException(s"output type ${a.dataType}"))
      Req.obj("name" -> s"c$i", "expr" -> s"CAST(${frag.cols(a.exprId)} AS $t)")
    }
    val result = Req.op("project", "result", Seq("input" -> frag.top), Seq("columns" -> resultCols))
    def send(k: Int, input: String) = Req.op("send", s"out_g$k", Seq("input" -> input),
      Seq("transport" -> "tcp", "host" -> sends(k)._1, "port" -> sends(k)._2))
    def copyOf(k: Int, ops: Seq[Op]) = ops.map { op =>
      val r = op.renamed(n => s"${n}_g$k")
      if (op.name == drivingRead) Req.set(r, "path", groups(k).map(_.path)) else r
    }
    val ops = if (spread > 1) {
      val keys = frag.output.indices.take(2).map(i => s"\"c$i\"")
      val shuffle = Req.op("shuffle", "spread_g0", Seq("input" -> "result_g0"), Seq("keys" -> keys, "partitions" -> spread))
      copyOf(0, base :+ result) ++ Seq(shuffle) ++ (0 until spread).map(k => send(k, s"spread_g0[$k]"))
    } else {
      groups.indices.flatMap(k => copyOf(k, base :+ result) :+ send(k, s"result_g$k"))
    }
    new Request(name, ops.asJava)
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
