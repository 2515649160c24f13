package io.jumpgate.spark.planner

/**
 * The dataflow request (contract section 1) as plain data, and its JSON.
 *
 * An [[Op]] names its inputs in `inputs` (field -> operation name) so that a candidate's operations
 * can be copied per destination group with fresh names ([[Op.renamed]]).
 */
final case class Op(kind: String, name: String, inputs: Seq[(String, String)], body: Seq[(String, Any)]) {
  def renamed(f: String => String): Op = copy(name = f(name), inputs = inputs.map { case (k, v) => (k, f(v)) })
  def withBody(key: String, value: Any): Op = copy(body = body.filterNot(_._1 == key) :+ (key -> value))
  def toJson: String = Json.obj(Seq("kind" -> kind, "name" -> name) ++ inputs ++ body)
}

final case class Request(name: String, ops: Seq[Op]) {
  def toJson: String = Json.obj(Seq("name" -> name, "operations" -> RawJson(ops.map(_.toJson).mkString("[", ",", "]"))))
}

final case class RawJson(text: String)

/** A small JSON writer for request bodies (String, numbers, Boolean, Seq, Map, pairs, RawJson). */
object Json {
  def obj(fields: Seq[(String, Any)]): String =
    fields.map { case (k, v) => s"${str(k)}:${value(v)}" }.mkString("{", ",", "}")

  def value(v: Any): String = v match {
    case null | None => "null"
    case Some(x) => value(x)
    case s: String => str(s)
    case b: Boolean => b.toString
    case i: Int => i.toString
    case l: Long => l.toString
    case d: Double => d.toString
    case r: RawJson => r.text
    case m: Map[_, _] => obj(m.toSeq.map { case (k, x) => (k.toString, x) })
    case s: Seq[_] => s.map(value).mkString("[", ",", "]")
    case o: JsonObject => obj(o.fields)
    case other => str(other.toString)
  }

  def str(s: String): String = {
    val b = new StringBuilder("\"")
    s.foreach {
      case '"' => b.append("\\\"")
      case '\\' => b.append("\\\\")
      case '\n' => b.append("\\n")
      case '\r' => b.append("\\r")
      case '\t' => b.append("\\t")
      case c if c < ' ' => b.append(f"\\u${c.toInt}%04x")
      case c => b.append(c)
    }
    b.append('"').toString
  }
}

/** An ordered JSON object inside a request body (e.g. one `{"name", "expr"}` column). */
final case class JsonObject(fields: Seq[(String, Any)])

object JsonObject {
  def apply(pairs: (String, Any)*)(implicit d: DummyImplicit): JsonObject = new JsonObject(pairs)
}
