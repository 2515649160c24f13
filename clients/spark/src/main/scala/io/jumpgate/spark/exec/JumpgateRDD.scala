package io.jumpgate.spark.exec

import org.apache.spark.{Partition, SparkContext, TaskContext}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter
import org.apache.spark.sql.execution.metric.SQLMetric

import io.jumpgate.spark.ntf.{NtfDecoders, NtfLayout}
import io.jumpgate.spark.receive.ReceiverService

final class JumpgatePartition(val index: Int, val location: Option[String]) extends Partition

/**
 * The rows of one finished Jumpgate job: partition i is destination i, read from the receiver
 * service of the executor that buffered it (its preferred location) and decoded by the layout's
 * generated decoder. A partition is released once a task has read it successfully; whatever is
 * left is released when the SQL execution ends.
 */
final class JumpgateRDD(
    sc: SparkContext,
    key: String,
    layoutJson: String,
    numFields: Int,
    locations: Seq[Option[String]],
    numOutputRows: SQLMetric) extends RDD[InternalRow](sc, Nil) {

  override protected def getPartitions: Array[Partition] =
    locations.zipWithIndex.map { case (loc, i) => new JumpgatePartition(i, loc): Partition }.toArray

  override protected def getPreferredLocations(split: Partition): Seq[String] =
    split.asInstanceOf[JumpgatePartition].location.toSeq

  override def compute(split: Partition, context: TaskContext): Iterator[InternalRow] = {
    val index = split.index
    val service = ReceiverService.get
    val dest = service.destination(key, index).getOrElse(throw new IllegalStateException(
      s"Jumpgate output $key[$index] is not buffered in this executor (released, or the task ran elsewhere)"))
    val streams = dest.data
    val layout = NtfLayout.fromJson(io.jumpgate.spark.client.JumpgateClient.mapper.readTree(layoutJson))
    val decoder = NtfDecoders.decoder(layout)
    val writer = new UnsafeRowWriter(numFields, 64)
    context.addTaskCompletionListener[Unit] { ctx => if (!ctx.isFailed && !ctx.isInterrupted) service.release(key, index) }
    val chunks = streams.iterator.flatMap(_.chunks.iterator).filter(_.tuples > 0)
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
        val len = io.jumpgate.spark.ntf.Le.i32(chunk, pos)
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
