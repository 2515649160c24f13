package io.jumpgate.spark.ntf

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.JsonNode
import org.codehaus.janino.ClassBodyEvaluator

import io.jumpgate.spark.planner.Types

import org.apache.spark.sql.types._

/** One field of an NTF layout (contract section 2). */
final case class NtfField(name: String, typ: String, offset: Int, size: Int, nullBit: Int)

/** An NTF layout as the server describes it for a `send`. */
final case class NtfLayout(nullBytes: Int, fixedSize: Int, variable: Boolean, fields: IndexedSeq[NtfField]) {
  /** Reject a layout whose fields do not carry the Spark types we expect, or fall outside the tuple. */
  def check(expected: Seq[DataType]): Unit = {
    if (fields.size != expected.size)
      throw new IllegalArgumentException(s"layout has ${fields.size} fields, expected ${expected.size}")
    fields.zip(expected).foreach { case (f, dt) =>
      val want = Types.contractType(dt).getOrElse(throw new IllegalArgumentException(s"no contract type for $dt"))
      if (f.typ.replace(" ", "") != want) throw new IllegalArgumentException(s"field ${f.name} is ${f.typ}, expected $want")
      val size = NtfLayout.sizeOf(want)
      if (f.size != size || f.offset < nullBytes || f.offset + f.size > fixedSize)
        throw new IllegalArgumentException(s"field ${f.name} at ${f.offset}+${f.size} does not fit the layout")
      if (f.nullBit < 0 || f.nullBit >= nullBytes * 8)
        throw new IllegalArgumentException(s"field ${f.name} null bit ${f.nullBit} is outside the null vector")
    }
  }
  def signature: String = s"$nullBytes/$fixedSize/" + fields.map(f => s"${f.typ}@${f.offset}:${f.nullBit}").mkString(",")
}

object NtfLayout {
  def sizeOf(t: String): Int = t match {
    case "boolean" => 1
    case "int32" | "date" => 4
    case _ => 8
  }

  def fromJson(j: JsonNode): NtfLayout = {
    val v = j.path("version").asInt(1)
    if (v != 1) throw new IllegalArgumentException(s"NTF layout version $v (this client reads 1)")
    NtfLayout(j.get("null_bytes").asInt, j.get("fixed_size").asInt, j.path("variable").asBoolean(false),
      j.get("fields").elements().asScala.map { f =>
        NtfField(f.get("name").asText, f.get("type").asText.toLowerCase, f.get("offset").asInt, f.get("size").asInt,
          f.get("null_bit").asInt)
      }.toIndexedSeq)
  }
}

/**
 * Generates an [[NtfRowDecoder]] per layout with Janino (as the thesis' client used Spark's code
 * generator for its NTF parser), cached by layout signature. Field i of the layout becomes field i
 * of the UnsafeRow.
 */
object NtfDecoders {
  private val cache = new ConcurrentHashMap[String, Class[_]]()

  def decoder(layout: NtfLayout): NtfRowDecoder = {
    val cls = cache.computeIfAbsent(layout.signature, _ => compile(layout))
    cls.getDeclaredConstructor().newInstance().asInstanceOf[NtfRowDecoder]
  }

  def source(layout: NtfLayout): String = {
    val le = "io.jumpgate.spark.ntf.Le"
    val b = new StringBuilder
    b.append("public void decode(byte[] b, int t, int len, ")
      .append("org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter w) {\n")
    b.append("  w.reset();\n  w.zeroOutNullBytes();\n")
    layout.fields.zipWithIndex.foreach { case (f, i) =>
      val at = s"t + ${f.offset}"
      b.append(s"  if (((b[t + ${f.nullBit >> 3}] >> ${f.nullBit & 7}) & 1) != 0) w.setNullAt($i);\n  else ")
      f.typ.replace(" ", "") match {
        case "boolean" => b.append(s"w.write($i, b[$at] != 0);\n")
        case "int32" | "date" => b.append(s"w.write($i, $le.i32(b, $at));\n")
        case "int64" => b.append(s"w.write($i, $le.i64(b, $at));\n")
        case "float64" => b.append(s"w.write($i, $le.f64(b, $at));\n")
        case "string" =>
          b.append(s"{\n    int so$i = $le.i32(b, $at);\n    int sl$i = $le.i32(b, $at + 4);\n")
          b.append(s"    if (sl$i < 0 || (sl$i > 0 && (so$i < ${layout.fixedSize} || so$i > len - sl$i))) ")
          b.append(s"throw corrupt(\"string field ${f.name} outside the variable section\", t);\n")
          b.append(s"    w.write($i, b, t + so$i, sl$i);\n  }\n")
        case d if d.startsWith("decimal(") =>
          val p = d.stripPrefix("decimal(").takeWhile(_ != ',').toInt
          val limit = BigInt(10).pow(p).toString + "L"
          b.append(s"{\n    long v$i = $le.i64(b, $at);\n")
          b.append(s"    if (v$i >= $limit || v$i <= -$limit) throw corrupt(\"decimal field ${f.name} exceeds its precision\", t);\n")
          b.append(s"    w.write($i, v$i);\n  }\n")
        case other => throw new IllegalArgumentException(s"NTF type $other")
      }
    }
    b.append("}\n")
    b.toString
  }

  private def compile(layout: NtfLayout): Class[_] = {
    val e = new ClassBodyEvaluator()
    e.setParentClassLoader(getClass.getClassLoader)
    e.setExtendedClass(classOf[NtfRowDecoder])
    e.setClassName("io.jumpgate.spark.ntf.GeneratedNtfDecoder")
    e.cook(source(layout))
    e.getClazz
  }
}
