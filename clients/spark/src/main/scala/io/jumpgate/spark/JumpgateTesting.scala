package io.jumpgate.spark

import scala.jdk.CollectionConverters._

import io.jumpgate.spark.exec.JumpgateExec

import org.apache.spark.sql.execution.{ColumnarToRowExec, QueryExecution, RowToColumnarExec, SparkPlan}
import org.apache.spark.sql.execution.aggregate.BaseAggregateExec
import org.apache.spark.sql.execution.exchange.{ReusedExchangeExec, ShuffleExchangeLike}
import org.apache.spark.sql.execution.joins.BaseJoinExec
import org.apache.spark.sql.execution.{FileSourceScanExec, FilterExec, ProjectExec}

/**
 * Plan inspection for tests and benchmarks (called from Python through py4j): what was offloaded,
 * the SQL metrics of the Jumpgate nodes, and the operation counts of the thesis' Table 3.5.
 */
object JumpgateTesting {
  private def plan(qe: QueryExecution): SparkPlan = qe.executedPlan

  /** One entry per JumpgateExec: the kinds of the operators it runs, bottom-up ("scan,filter,project"). */
  def offloaded(qe: QueryExecution): java.util.List[String] =
    JumpgateExplain.offloaded(plan(qe)).map(_.frag.kinds.mkString(",")).asJava

  def report(qe: QueryExecution): String = JumpgateExplain.report(plan(qe))

  /** The sum of one SQL metric over the query's JumpgateExec nodes (jgRows, jgBytes, jgTime, jgJobs, fallbacks). */
  def metric(qe: QueryExecution, name: String): Long =
    JumpgateExplain.offloaded(plan(qe)).map(_.metrics.get(name).map(_.value).getOrElse(0L)).sum

  /** The category of a Spark operator in Table 3.5, or None for plumbing that is not counted. */
  def category(p: SparkPlan): Option[String] = p match {
    case _: ColumnarToRowExec | _: RowToColumnarExec | _: ReusedExchangeExec | _: JumpgateExec => None
    case _: FileSourceScanExec => Some("scan")
    case _: FilterExec => Some("filter")
    case _: ProjectExec => Some("project")
    case _: BaseJoinExec => Some("join")
    case _: BaseAggregateExec => Some("aggregate")
    case _: ShuffleExchangeLike => Some("shuffle")
    case _ => Some("other")
  }

  /** Operation counts "spark.<category>" and "jumpgate.<category>" of a (planned or executed) query. */
  def counts(qe: QueryExecution): java.util.Map[String, java.lang.Long] = {
    val nodes = JumpgateExplain.nodes(plan(qe))
    val spark = nodes.flatMap(category).map("spark." + _)
    val jg = JumpgateExplain.offloaded(plan(qe)).flatMap(_.frag.allFrags.map(f => "jumpgate." + f.kind))
    (spark ++ jg).groupBy(identity).map { case (k, v) => k -> java.lang.Long.valueOf(v.size.toLong) }.asJava
  }
}
