package io.jumpgate.spark.planner

import io.jumpgate.core.request.Op

import org.apache.spark.sql.catalyst.expressions.{Attribute, ExprId}
import org.apache.spark.sql.execution.SparkPlan

/** A file a scan reads: its path relative to the server's data root, and its size. */
final case class FileRef(path: String, bytes: Long)

/** What a scan reads; `rows` is an estimate (see [[Estimates]]). */
final case class ScanInfo(format: String, table: String, files: Seq[FileRef], rows: Double = 0.0,
                          stringBytes: Map[String, Double] = Map.empty) {
  def bytes: Long = files.map(_.bytes).sum
}

/**
 * One Spark operator that can run on Jumpgate, lowered to contract operations.
 *
 * `ops` are this operator's own operations (its children's come from `children`); `top` is the
 * operation whose output is this operator's output, and `cols` names each output attribute's
 * column in it (contract column names, double-quoted). A subtree of frags is an offload candidate.
 */
final case class Frag(
    node: SparkPlan,
    kind: String,
    children: Seq[Frag],
    ops: Seq[Op],
    top: String,
    cols: Map[ExprId, String],
    scan: Option[ScanInfo] = None,
    /** Index of the child whose rows drive this operator (the probe side of a join). */
    drivingChild: Int = 0,
    /** A short label for EXPLAIN, e.g. "Filter" or "BroadcastHashJoin inner". */
    label: String = "") {

  def allOps: Seq[Op] = children.flatMap(_.allOps) ++ ops
  def allFrags: Seq[Frag] = children.flatMap(_.allFrags) :+ this
  def scans: Seq[ScanInfo] = allFrags.flatMap(_.scan)
  def inputBytes: Long = scans.map(_.bytes).sum
  def largestInput: Long = if (scans.isEmpty) 0L else scans.map(_.bytes).max
  def output: Seq[Attribute] = node.output

  /** The scan whose files are split across destinations: follow the driving children down. */
  def drivingScan: Frag = if (children.isEmpty) this else children(drivingChild).drivingScan

  /** Operator kinds (scan, filter, project, join, aggregate, shuffle) in this subtree. */
  def kinds: Seq[String] = allFrags.map(_.kind)

  def describe: String = allFrags.map(f => if (f.label.nonEmpty) f.label else f.kind).mkString(" -> ")
}
