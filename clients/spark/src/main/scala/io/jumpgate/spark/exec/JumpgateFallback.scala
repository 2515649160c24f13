package io.jumpgate.spark.exec

import java.net.URI
import java.nio.file.{Path, Paths}
import java.util.concurrent.ConcurrentHashMap

import io.jumpgate.spark.planner.FileRef
import io.jumpgate.core.receive.ReceiverService

import org.apache.hadoop.fs.{Path => HPath}
import org.apache.spark.TaskContext
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.execution.{ExecSubqueryExpression, FileSourceScanExec, SparkPlan}
import org.apache.spark.sql.execution.datasources.{FileIndex, PartitionDirectory}
import org.apache.spark.sql.execution.exchange.Exchange
import org.apache.spark.sql.types.StructType

/**
 * Spark's own plan for one partition of a [[JumpgateRDD]], for when its buffer is gone and
 * Jumpgate cannot run the job again: the node's original subtree with its file scan restricted to
 * the files of that partition's group, so the partition has exactly the rows it would have had.
 *
 * Only a subtree a task can run on its own qualifies: one file scan and row-wise operators over it
 * (filters, projections, partial aggregates), with no exchange (a broadcast join's build side is a
 * job of its own, which a task must not start) and no subquery; and only when partitions are file
 * groups (not a shuffle's spread). The plans are prepared on the driver when the job has run (a
 * plan node made inside a task has no session), and executed, lazily, only by a task that needs
 * one; they are dropped with the driver's RDD.
 */
object JumpgateFallback {
  private val plans = new ConcurrentHashMap[String, IndexedSeq[SparkPlan]]()
  private val cleaner = java.lang.ref.Cleaner.create()

  /** Prepare the per-partition plans of `rdd` (partition k reads `groups(k)`), where there can be any. */
  def register(rdd: JumpgateRDD, exec: JumpgateExec, groups: Seq[Seq[FileRef]]): Unit = {
    val key = rdd.spec.key
    val root = exec.jgConf.dataRoot.map(r => Paths.get(r).toAbsolutePath.normalize())
    val prepared = for {
      original <- Option(exec.original) if groups.size == rdd.spec.destinations && selfContained(original)
      dataRoot <- root
    } yield groups.map(g => JumpgateExec.prepareFallback(restrict(original, g.map(f => dataRoot.resolve(f.path)).toSet)))
    prepared.foreach(p => plans.put(key, p.toIndexedSeq))
    // Once no RDD can read the output, nothing may: drop its plans, its lock and any buffers left.
    cleaner.register(rdd, () => { plans.remove(key); OutputRecovery.forget(key); ReceiverService.get.release(key) })
  }

  /** The rows of partition `index` computed by Spark, inside the calling task; None: no plan for it. */
  def rows(key: String, index: Int, context: TaskContext): Option[Iterator[InternalRow]] =
    Option(plans.get(key)).filter(_.isDefinedAt(index)).map { ps =>
      val rdd = ps(index).execute()
      rdd.partitions.iterator.flatMap(p => rdd.iterator(p, context))
    }

  private def selfContained(plan: SparkPlan): Boolean = {
    def subquery(e: Expression) = e.find(_.isInstanceOf[ExecSubqueryExpression]).isDefined
    plan.collect { case s: FileSourceScanExec => s }.size == 1 &&
      plan.find(p => p.isInstanceOf[Exchange] || p.expressions.exists(subquery)).isEmpty
  }

  private def restrict(plan: SparkPlan, files: Set[Path]): SparkPlan = plan.transformUp {
    case s: FileSourceScanExec =>
      s.copy(relation = s.relation.copy(location = new OnlyTheseFiles(s.relation.location, files))(s.relation.sparkSession))
  }
}

/** A table's file index seen through a list of files: listing returns only those. */
final class OnlyTheseFiles(base: FileIndex, files: Set[Path]) extends FileIndex {
  private def keep(p: HPath): Boolean =
    files.contains(Paths.get(new URI("file", null, p.toUri.getPath, null)).toAbsolutePath.normalize())

  override def rootPaths: Seq[HPath] = base.rootPaths
  override def listFiles(partitionFilters: Seq[Expression], dataFilters: Seq[Expression]): Seq[PartitionDirectory] =
    base.listFiles(partitionFilters, dataFilters).map(d => d.copy(files = d.files.filter(f => keep(f.getPath))))
      .filter(_.files.nonEmpty)
  override def inputFiles: Array[String] = base.inputFiles.filter(f => keep(new HPath(f)))
  override def refresh(): Unit = base.refresh()
  override def sizeInBytes: Long = base.sizeInBytes
  override def partitionSchema: StructType = base.partitionSchema
}
