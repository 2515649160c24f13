package io.jumpgate.spark.exec

import io.jumpgate.core.request.{Op, Request}
import io.jumpgate.spark.planner.Req

/**
 * What a [[JumpgateRDD]] needs to produce its rows again when the buffers of its job are gone
 * (released when the SQL execution ended, a cached partition recomputed later, the receiver service
 * restarted): the job's request with its `send`s still to be pointed at fresh ports, the output
 * layouts the first run had (a re-run must decode the same way), and the node's `spark.jumpgate.*`
 * settings. Plain data: it travels with every task of the RDD.
 *
 * @param key           the receiver service's name for the job's destinations
 * @param request       the request of the first run; `out_g<k>` sends to destination k
 * @param layoutJsons   the NTF layout of each destination, as the server answered the first run
 */
final case class OutputSpec(key: String, request: Request, layoutJsons: Seq[String], numFields: Int,
                            describe: String, settings: Map[String, String]) {
  def destinations: Int = layoutJsons.size

  /** The request with destination k's send pointed at `sends(k)`. */
  def requestFor(sends: Seq[(String, Int)]): Request = request.mapOps { op =>
    OutputSpec.sendIndex(op) match {
      case Some(k) => Req.set(Req.set(op, "host", sends(k)._1), "port", sends(k)._2)
      case None => op
    }
  }
}

object OutputSpec {
  private val SendName = """out_g(\d+)""".r

  /** The destination a `send` operation feeds (`out_g<k>`), if `op` is one. */
  def sendIndex(op: Op): Option[Int] = op.name match {
    case SendName(k) if op.kind == "send" => Some(k.toInt)
    case _ => None
  }
}
