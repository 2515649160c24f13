package io.jumpgate.spark

import scala.jdk.CollectionConverters._

import io.jumpgate.spark.exec.JumpgateExec
import io.jumpgate.spark.planner.{JumpgateTags, OffloadPlanner}

import org.apache.spark.internal.Logging
import org.apache.spark.sql.{SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, QueryStageExec}

/**
 * `spark.sql.extensions=io.jumpgate.spark.JumpgateExtensions` (or `spark.plugins=
 * org.apache.spark.jumpgate.JumpgatePlugin`, which adds this). It installs the offload planner:
 *
 *  - with adaptive execution (Spark's default), as a query-stage preparation rule: it sees the whole
 *    physical plan with its exchanges, before stages are cut, and again when AQE re-plans;
 *  - otherwise, as a columnar rule, which Spark applies to the whole prepared plan.
 *
 * Both call the same [[OffloadPlanner]]; nodes it has looked at are tagged, so the columnar rule
 * leaves alone what the stage rule already decided.
 */
class JumpgateExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(ext: SparkSessionExtensions): Unit = {
    ext.injectQueryStagePrepRule(session => OffloadRule(session))
    ext.injectColumnar(session => new ColumnarRule {
      override def preColumnarTransitions: Rule[SparkPlan] = OffloadRule(session, onlyIfUnvisited = true)
    })
  }
}

case class OffloadRule(session: SparkSession, onlyIfUnvisited: Boolean = false) extends Rule[SparkPlan] with Logging {
  override def apply(plan: SparkPlan): SparkPlan = {
    val conf = JumpgateConf.fromSqlConf(session.sessionState.conf)
    if (!conf.enabled) return plan
    if (onlyIfUnvisited && alreadyPlanned(plan)) {
      // Adaptive execution is creating a query stage: it will be materialized now, so its jobs may start.
      if (conf.prefetch && plan.find(_.isInstanceOf[AdaptiveSparkPlanExec]).isEmpty)
        plan.foreach { case j: JumpgateExec if j.getTagValue(JumpgateTags.Adaptive).isDefined => j.prefetch(); case _ => }
      return plan
    }
    try {
      val planned = new OffloadPlanner(session, conf).apply(plan)
      // As the query-stage preparation rule, this runs inside adaptive execution: mark its nodes.
      if (!onlyIfUnvisited) planned.foreach { case j: JumpgateExec => j.setTagValue(JumpgateTags.Adaptive, true); case _ => }
      planned
    } catch {
      case scala.util.control.NonFatal(e) =>
        logWarning(s"Jumpgate: offload planning failed, the query runs in Spark: $e", e)
        plan
    }
  }

  private def alreadyPlanned(plan: SparkPlan): Boolean = plan.exists {
    case _: JumpgateExec | _: QueryStageExec | _: AdaptiveSparkPlanExec => true
    case n => n.getTagValue(JumpgateTags.Visited).isDefined
  }
}

object JumpgateExtensions {
  /** The `spark.jumpgate.*` settings of a session, frozen into a plan node at planning time. */
  def snapshot(session: SparkSession): Map[String, String] =
    session.sessionState.conf.getAllConfs.filter(_._1.startsWith("spark.jumpgate."))
}
