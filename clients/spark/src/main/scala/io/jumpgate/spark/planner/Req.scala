package io.jumpgate.spark.planner

import scala.jdk.CollectionConverters._

import io.jumpgate.core.request.{JsonObject, Op, RawJson}

/**
 * Scala-side builders for jvm-core's request model ([[io.jumpgate.core.request.Op]],
 * [[io.jumpgate.core.request.JsonObject]]): the converters write bodies with Scala values (Seq,
 * Map, Option, Int), and the core's JSON writer takes Java ones. Values are copied into
 * ArrayList/LinkedHashMap, so a request stays serializable (it travels with every task).
 */
object Req {
  def op(kind: String, name: String, inputs: Seq[(String, String)], body: Seq[(String, Any)]): Op = {
    val in = new java.util.LinkedHashMap[String, String]()
    inputs.foreach { case (k, v) => in.put(k, v) }
    val b = new java.util.LinkedHashMap[String, AnyRef]()
    body.foreach { case (k, v) => b.put(k, toJava(v)) }
    new Op(kind, name, in, b)
  }

  /** An ordered JSON object, e.g. one `{"name", "expr"}` column. */
  def obj(pairs: (String, Any)*): JsonObject = {
    val m = new java.util.LinkedHashMap[String, AnyRef]()
    pairs.foreach { case (k, v) => m.put(k, toJava(v)) }
    JsonObject.of(m)
  }

  /** A body field set on a copy of `op` (Scala values converted). */
  def set(op: Op, key: String, value: Any): Op = op.withField(key, toJava(value))

  /** A Scala value as the core's JSON writer takes it. */
  def toJava(v: Any): AnyRef = v match {
    case null | None => null
    case Some(x) => toJava(x)
    case s: String => s
    case i: Int => Integer.valueOf(i)
    case l: Long => java.lang.Long.valueOf(l)
    case d: Double => java.lang.Double.valueOf(d)
    case b: Boolean => java.lang.Boolean.valueOf(b)
    case o: JsonObject => o
    case r: RawJson => r
    case m: scala.collection.Map[_, _] =>
      val out = new java.util.LinkedHashMap[String, AnyRef]()
      m.foreach { case (k, x) => out.put(k.toString, toJava(x)) }
      out
    case s: Iterable[_] => new java.util.ArrayList[AnyRef](s.map(toJava).toSeq.asJava)
    case other => throw new IllegalArgumentException(s"no JSON form for ${other.getClass.getName}: $other")
  }
}
