package io.jumpgate.spark.ntf

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import org.codehaus.janino.ClassBodyEvaluator

import io.jumpgate.core.ntf.{Le, NtfLayout, NtfReader}
import io.jumpgate.core.request.ContractType.Kind

/**
 * Generates an [[NtfRowDecoder]] per layout with Janino (as the thesis' client used Spark's code
 * generator for its NTF parser), cached by layout signature. Field i of the layout becomes field i
 * of the UnsafeRow. The layout model, its checks and the little-endian loads ([[Le]]) are
 * jvm-core's; the generated code performs the same checks as jvm-core's [[NtfReader]] (strings
 * inside the variable section, decimals within their precision), unrolled per field.
 */
object NtfDecoders {
  private val cache = new ConcurrentHashMap[String, Class[_]]()

  def decoder(layout: NtfLayout): NtfRowDecoder = {
    val cls = cache.computeIfAbsent(layout.signature, _ => compile(layout))
    cls.getDeclaredConstructor().newInstance().asInstanceOf[NtfRowDecoder]
  }

  def source(layout: NtfLayout): String = {
    val le = classOf[Le].getName
    val b = new StringBuilder
    val dec = "org.apache.spark.sql.types.Decimal"
    // a wide decimal's bound, 10^p, once per class
    layout.fields.asScala.zipWithIndex.foreach { case (f, i) =>
      if (f.`type`.isWideDecimal)
        b.append(s"private static final java.math.BigInteger LIMIT$i = java.math.BigInteger.TEN.pow(${f.`type`.precision});\n")
    }
    b.append("public void decode(byte[] b, int t, int len, ")
      .append("org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter w) {\n")
    b.append("  w.reset();\n  w.zeroOutNullBytes();\n")
    layout.fields.asScala.zipWithIndex.foreach { case (f, i) =>
      val at = s"t + ${f.offset}"
      val (p, s) = (f.`type`.precision, f.`type`.scale)
      // a decimal of more than 18 digits lives in the row's variable part: a NULL keeps its 16 bytes
      val setNull = if (f.`type`.isWideDecimal) s"w.write($i, ($dec) null, $p, $s);" else s"w.setNullAt($i);"
      b.append(s"  if (((b[t + ${f.nullBit >> 3}] >> ${f.nullBit & 7}) & 1) != 0) $setNull\n  else ")
      f.`type`.kind match {
        case Kind.DECIMAL if f.`type`.isWideDecimal =>
          // 16 bytes, little-endian two's complement: a long when the high word is the sign of the
          // low one (any long is within 19 or more digits), else a BigInteger checked against 10^p
          b.append(s"{\n    long lo$i = $le.i64(b, $at);\n    long hi$i = $le.i64(b, $at + 8);\n")
          b.append(s"    if (hi$i == (lo$i >> 63)) w.write($i, $dec$$.MODULE$$.apply(lo$i, $p, $s), $p, $s);\n")
          b.append(s"    else {\n      byte[] be$i = new byte[16];\n")
          b.append(s"      for (int k = 0; k < 16; k++) be$i[k] = b[$at + 15 - k];\n")
          b.append(s"      java.math.BigInteger u$i = new java.math.BigInteger(be$i);\n")
          b.append(s"      if (u$i.abs().compareTo(LIMIT$i) >= 0) throw corrupt(\"decimal field ${f.name} exceeds its precision\", t);\n")
          b.append(s"      w.write($i, $dec$$.MODULE$$.apply(new java.math.BigDecimal(u$i, $s), $p, $s), $p, $s);\n    }\n  }\n")
        case Kind.BOOLEAN => b.append(s"w.write($i, b[$at] != 0);\n")
        case Kind.INT32 | Kind.DATE => b.append(s"w.write($i, $le.i32(b, $at));\n")
        case Kind.INT64 => b.append(s"w.write($i, $le.i64(b, $at));\n")
        case Kind.FLOAT64 => b.append(s"w.write($i, $le.f64(b, $at));\n")
        case Kind.STRING =>
          b.append(s"{\n    int so$i = $le.i32(b, $at);\n    int sl$i = $le.i32(b, $at + 4);\n")
          b.append(s"    if (sl$i < 0 || (sl$i > 0 && (so$i < ${layout.fixedSize} || so$i > len - sl$i))) ")
          b.append(s"throw corrupt(\"string field ${f.name} outside the variable section\", t);\n")
          b.append(s"    w.write($i, b, t + so$i, sl$i);\n  }\n")
        case Kind.DECIMAL =>
          val limit = NtfReader.pow10(f.`type`.precision).toString + "L"
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
