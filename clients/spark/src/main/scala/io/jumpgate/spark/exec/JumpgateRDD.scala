package io.jumpgate.spark.exec

import org.apache.spark.{Partition, SparkContext, TaskContext}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter
import org.apache.spark.sql.execution.metric.SQLMetric

import scala.jdk.CollectionConverters._

import io.jumpgate.core.ntf.{Le, NtfLayout}
import io.jumpgate.core.receive.{Destination, ReceiverService}
import io.jumpgate.spark.ntf.NtfDecoders

final class JumpgatePartition(val index: Int, val location: Option[String]) extends Partition

/**
 * The rows of one finished Jumpgate job: partition i is destination i, read from the receiver
 * service of the executor that buffered it (its preferred location) and decoded by the layout's
 * generated decoder.
 *
 * Spark may compute a partition more than once: a range partitioner samples its input in a job of
 * its own before the shuffle map stage reads it again, a failed task is retried, a lost shuffle
 * output or an evicted cached block is recomputed. So a read never releases a destination that a
 * SQL execution owns (the execution's end does, [[JumpgateRunner]]), and a partition whose buffer
 * is gone all the same is never an error: [[OutputRecovery]] re-runs the job, or, where Jumpgate
 * cannot, runs Spark's own plan for the partition's files ([[JumpgateFallback]]).
 */
final class JumpgateRDD(
    sc: SparkContext,
    val spec: OutputSpec,
    locations: Seq[Option[String]],
    numOutputRows: SQLMetric,
    reruns: SQLMetric,
    fallbacks: SQLMetric) extends RDD[InternalRow](sc, Nil) {

  override protected def getPartitions: Array[Partition] =
    locations.zipWithIndex.map { case (loc, i) => new JumpgatePartition(i, loc): Partition }.toArray

  override protected def getPreferredLocations(split: Partition): Seq[String] =
    split.asInstanceOf[JumpgatePartition].location.toSeq

  override def compute(split: Partition, context: TaskContext): Iterator[InternalRow] = {
    val index = split.index
    OutputRecovery.destination(spec, index, context, reruns) match {
      case Right(dest) => decode(dest, context)
      case Left(why) => OutputRecovery.fallback(spec, index, context, why, fallbacks)
    }
  }

  private def decode(dest: Destination, context: TaskContext): Iterator[InternalRow] = {
    val index = dest.index
    val streams = dest.data.asScala
    if (dest.reads.getAndIncrement() > 0) io.jumpgate.spark.JumpgateStats.reread()
    val layout = NtfLayout.fromJson(spec.layoutJsons(index))
    val decoder = NtfDecoders.decoder(layout)
    val writer = new UnsafeRowWriter(spec.numFields, 64)
    if (!OutputRecovery.ownedByExecution(spec.key)) { // nothing else will release it
      context.addTaskCompletionListener[Unit] { ctx =>
        if (!ctx.isFailed && !ctx.isInterrupted) ReceiverService.get.release(spec.key, index)
      }
    }
    val chunks = streams.iterator.flatMap(_.chunks.asScala.iterator).filter(_.tuples > 0)
    new Iterator[InternalRow] {
      private var chunk: Array[Byte] = _
      private var end = 0
      private var pos = 0
      private def advance(): Boolean = {
        while (pos >= end) {
          if (!chunks.hasNext) return false
          val c = chunks.next()
          chunk = c.bytes; end = c.end; pos = 0
        }
        true
      }
      override def hasNext: Boolean = advance()
      override def next(): InternalRow = {
        if (!advance()) throw new NoSuchElementException
        val len = Le.i32(chunk, pos)
        decoder.decode(chunk, pos + 4, len, writer)
        pos += 4 + len
        numOutputRows += 1
        writer.getRow
      }
    }
  }
}

object JumpgateRDD {
  /** Spark's string form of "this executor" as a preferred location. */
  def executorLocation(host: String, executorId: String): Option[String] = Some(s"executor_${host}_$executorId")
}
