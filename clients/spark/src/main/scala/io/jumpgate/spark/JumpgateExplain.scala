package io.jumpgate.spark

import scala.collection.mutable.ArrayBuffer

import io.jumpgate.spark.exec.JumpgateExec
import io.jumpgate.spark.planner.JumpgateTags

import org.apache.spark.sql.ExtendedExplainGenerator
import org.apache.spark.sql.execution.{InputAdapter, SparkPlan, WholeStageCodegenExec}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, QueryStageExec}

/**
 * The "Jumpgate" section of EXPLAIN EXTENDED and of the SQL tab (Spark's
 * spark.sql.extendedExplainProviders; the plugin registers it): which subtrees were offloaded, and
 * for every node that stayed in Spark, why.
 */
class JumpgateExplain extends ExtendedExplainGenerator {
  override def title: String = "Jumpgate"
  override def generateExtendedInfo(plan: SparkPlan): String = JumpgateExplain.report(plan)
}

object JumpgateExplain {
  /** Every node of a plan, looking through adaptive plans, query stages and subqueries. */
  def nodes(plan: SparkPlan): Seq[SparkPlan] = {
    val out = ArrayBuffer[SparkPlan]()
    val seen = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap[SparkPlan, java.lang.Boolean]())
    def walk(p: SparkPlan): Unit = if (seen.add(p)) p match {
      case a: AdaptiveSparkPlanExec => walk(a.executedPlan)
      case q: QueryStageExec => walk(q.plan)
      case w: WholeStageCodegenExec => walk(w.child)
      case i: InputAdapter => walk(i.child)
      case n =>
        out += n
        n.children.foreach(walk)
        n.subqueries.foreach(walk)
    }
    walk(plan)
    out.toSeq
  }

  def offloaded(plan: SparkPlan): Seq[JumpgateExec] = nodes(plan).collect { case j: JumpgateExec => j }

  def report(plan: SparkPlan): String = {
    val all = nodes(plan)
    val jg = all.collect { case j: JumpgateExec => s"  ${j.simpleString(25)}" }
    val kept = all.filterNot(_.isInstanceOf[JumpgateExec]).flatMap { n =>
      n.getTagValue(JumpgateTags.Reason).map(r => s"  ${n.nodeName}: $r")
    }
    val b = new StringBuilder
    b.append(if (jg.isEmpty) "Offloaded to Jumpgate: nothing\n" else jg.mkString("Offloaded to Jumpgate:\n", "\n", "\n"))
    if (kept.nonEmpty) b.append(kept.distinct.mkString("Kept in Spark:\n", "\n", "\n"))
    b.toString
  }
}
