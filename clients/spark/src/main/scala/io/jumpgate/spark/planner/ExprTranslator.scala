package io.jumpgate.spark.planner

import org.apache.spark.sql.catalyst.expressions._
import scala.util.{Left, Right}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

/**
 * Catalyst expressions -> the contract's SQL expression text (contract section 1, "Expressions").
 *
 * Every construct answers for itself: translated text, or a [[Why]] naming the construct and the
 * reason. Only constructs whose results are the same in Spark and in Jumpgate for every input are
 * translated by default; the rest are `incompatible` (translated only with
 * spark.jumpgate.allowIncompatible) or unsupported. Where Jumpgate fails a job on a value (an
 * overflow, a division by zero) and Spark would not, the job fails and the subtree runs in Spark:
 * slower, never wrong.
 *
 * Columns are referenced through `cols`: the contract name of each input attribute (by exprId).
 */
final class ExprTranslator(cols: Map[ExprId, String], allowIncompatible: Boolean) {
  import ExprTranslator._

  type R = Either[Why, String]

  def apply(e: Expression): R = translate(e)

  private def fail(msg: String): R = Left(Why(msg))
  private def incompatible(msg: String, text: => R): R =
    if (allowIncompatible) text else Left(Why(msg, incompatible = true))

  private def all(es: Seq[Expression]): Either[Why, Seq[String]] = {
    val out = Seq.newBuilder[String]
    for (e <- es) translate(e) match {
      case Left(w) => return Left(w)
      case Right(s) => out += s
    }
    Right(out.result())
  }

  private def typeOk(e: Expression): Option[Why] = e.dataType match {
    case NullType => None
    case dt => Types.contractType(dt).left.toOption.map(w => Why(s"${name(e)}: ${w.message}"))
  }

  private def bin(op: String, l: Expression, r: Expression): R =
    for (a <- translate(l); b <- translate(r)) yield s"($a $op $b)"

  private def translate(e: Expression): R = {
    typeOk(e) match {
      case Some(w) => return Left(w)
      case None =>
    }
    e match {
      case a: AttributeReference =>
        cols.get(a.exprId).toRight(Why(s"column ${a.name}#${a.exprId.id} is not an input of the offloaded subtree"))
      case a: Alias => translate(a.child)
      case l: Literal => literal(l)
      case k: KnownNotNull => translate(k.child)

      case And(l, r) => bin("AND", l, r)
      case Or(l, r) => bin("OR", l, r)
      case Not(c) => translate(c).map(s => s"(NOT $s)")
      case EqualTo(l, r) => bin("=", l, r)
      case LessThan(l, r) => bin("<", l, r)
      case LessThanOrEqual(l, r) => bin("<=", l, r)
      case GreaterThan(l, r) => bin(">", l, r)
      case GreaterThanOrEqual(l, r) => bin(">=", l, r)
      case EqualNullSafe(l, r) =>
        for (a <- translate(l); b <- translate(r)) yield
          s"(CASE WHEN $a IS NULL AND $b IS NULL THEN TRUE WHEN $a IS NULL OR $b IS NULL THEN FALSE ELSE $a = $b END)"
      case IsNull(c) => translate(c).map(s => s"($s IS NULL)")
      case IsNotNull(c) => translate(c).map(s => s"($s IS NOT NULL)")
      case In(v, list) if list.forall(_.foldable) =>
        for (a <- translate(v); items <- all(list)) yield s"($a IN (${items.mkString(", ")}))"
      case _: In => fail("IN with a non-literal list")
      case s: InSet =>
        val lits = s.hset.toSeq.map(v => Literal.create(v, s.child.dataType))
        for (a <- translate(s.child); items <- all(lits)) yield
          if (items.isEmpty) s"($a IS NULL AND NULL)" else s"($a IN (${items.mkString(", ")}))"

      case a: Add => arith("+", a, a.left, a.right)
      case s: Subtract => arith("-", s, s.left, s.right)
      case m: Multiply => arith("*", m, m.left, m.right)
      case d: Divide =>
        if (d.dataType != DoubleType) fail(s"division yielding ${d.dataType.simpleString} (Jumpgate divides in float64)")
        else bin("/", d.left, d.right)
      case r: Remainder =>
        if (r.dataType == DoubleType) incompatible("float remainder", bin("%", r.left, r.right))
        else arith("%", r, r.left, r.right)
      case u: UnaryMinus => translate(u.child).map(s => s"(0 - $s)").flatMap(t => castTo(t, u.dataType))
      case a: Abs => translate(a.child).map(s => s"abs($s)")

      case c: Cast => cast(c)
      case u: UnscaledValue =>
        // DecimalAggregates' rewrite: the unscaled long of a decimal (exact: scale s times 10^s).
        val d = u.child.dataType.asInstanceOf[DecimalType]
        translate(u.child).map(s => s"CAST(($s * ${BigInt(10).pow(d.scale)}) AS int64)")

      case CaseWhen(branches, elseValue) =>
        val parts = branches.map { case (c, v) => for (a <- translate(c); b <- translate(v)) yield s"WHEN $a THEN $b" }
        parts.collectFirst { case Left(w) => w } match {
          case Some(w) => Left(w)
          case None =>
            val els = elseValue.map(translate).getOrElse(Right("NULL"))
            els.map(x => s"(CASE ${parts.map(_.toOption.get).mkString(" ")} ELSE $x END)")
        }
      case If(p, a, b) =>
        for (x <- translate(p); y <- translate(a); z <- translate(b)) yield s"(CASE WHEN $x THEN $y ELSE $z END)"
      case c: Coalesce => all(c.children).map(xs => s"coalesce(${xs.mkString(", ")})")

      case l: Like =>
        (l.right, l.escapeChar) match {
          case (Literal(p: UTF8String, _), '\\') if !p.toString.contains("\\") =>
            translate(l.left).map(s => s"($s LIKE ${quote(p.toString)})")
          case (Literal(_, _), _) => fail("LIKE with an escape character or a backslash in the pattern")
          case _ => fail("LIKE with a non-literal pattern")
        }
      case s: StartsWith => likeOf(s.left, s.right, p => s"$p%")
      case s: EndsWith => likeOf(s.left, s.right, p => s"%$p")
      case s: Contains => likeOf(s.left, s.right, p => s"%$p%")
      case s: Substring =>
        (s.pos, s.len) match {
          case (Literal(p: Int, IntegerType), Literal(n: Int, IntegerType)) if p >= 1 && n >= 0 =>
            translate(s.str).map(x => s"substr($x, $p, $n)")
          case _ => fail("substr with a start below 1, a negative or non-literal length")
        }
      case l: Length if l.child.dataType.isInstanceOf[StringType] => translate(l.child).map(s => s"length($s)")
      case l: Lower => incompatible("lower (Unicode case mapping differs)", translate(l.child).map(s => s"lower($s)"))
      case u: Upper => incompatible("upper (Unicode case mapping differs)", translate(u.child).map(s => s"upper($s)"))
      case y: Year if y.child.dataType == DateType => translate(y.child).map(s => s"year($s)")
      case m: Month if m.child.dataType == DateType => translate(m.child).map(s => s"month($s)")
      case d: DayOfMonth if d.child.dataType == DateType => translate(d.child).map(s => s"day($s)")

      case k: KnownFloatingPointNormalized => incompatible("NaN/-0.0 normalization of a float key", translate(k.child))
      case s: SubqueryExpression => fail(s"${name(s)}: references the result of a subquery")
      case p: PlanExpression[_] => fail(s"${name(p)}: references the result of a subquery")
      case other => fail(s"expression ${name(other)} is not supported")
    }
  }

  /** + - * %: decimal results must have the scale the contract gives them (section 1, Types). */
  private def arith(op: String, e: Expression, l: Expression, r: Expression): R = {
    (e.dataType, l.dataType, r.dataType) match {
      case (d: DecimalType, a: DecimalType, b: DecimalType) =>
        val jgScale = op match {
          case "*" => a.scale + b.scale
          case _ => math.max(a.scale, b.scale)
        }
        if (jgScale != d.scale)
          fail(s"decimal $op yields scale ${d.scale} in Spark but $jgScale in Jumpgate")
        else bin(op, l, r).flatMap(t => castTo(t, e.dataType))
      case (DoubleType, _, _) => bin(op, l, r)
      case (IntegerType | LongType, _, _) => bin(op, l, r).flatMap(t => castTo(t, e.dataType))
      case (dt, _, _) => fail(s"arithmetic on ${dt.simpleString}")
    }
  }

  /** Give an integer or decimal result Spark's exact type: Jumpgate's integer arithmetic is 64-bit,
   *  so a narrower Spark type is restored by a CAST (which fails the job when out of range). */
  private def castTo(text: String, dt: DataType): R = dt match {
    case IntegerType => Right(s"CAST($text AS int32)")
    case d: DecimalType if d.precision <= Types.MaxDecimalPrecision => Right(s"CAST($text AS decimal(${d.precision},${d.scale}))")
    case _: DecimalType => Right(text) // an intermediate beyond 18 digits: exact while it fits int64, else the job fails
    case _ => Right(text)
  }

  private def cast(c: Cast): R = {
    val from = c.child.dataType
    val to = c.dataType
    def plain: R = translate(c.child).flatMap(s => Types.contractType(to) match {
      case Right(t) => Right(s"CAST($s AS $t)")
      case Left(w) => Left(w)
    })
    (from, to) match {
      case (a, b) if a == b => translate(c.child)
      case (NullType, _) => plain
      case (IntegerType, LongType | DoubleType | _: DecimalType) => plain
      case (LongType, DoubleType | _: DecimalType) => plain
      case (a: DecimalType, b: DecimalType) if b.scale >= a.scale => plain
      case (_: DecimalType, _: DecimalType) => plain // rounds half away from zero, as Spark's HALF_UP
      case (a: DecimalType, DoubleType) if a.precision <= 15 => plain // both exact: unscaled / 10^s, one rounding
      case (_: DecimalType, DoubleType) => incompatible("decimal with more than 15 digits to double", plain)
      case (DateType, _: StringType) => plain
      case (IntegerType | LongType, _: StringType) => plain
      case _ => fail(s"CAST from ${from.simpleString} to ${to.simpleString}")
    }
  }

  private def likeOf(str: Expression, pat: Expression, make: String => String): R = pat match {
    case Literal(p: UTF8String, _) =>
      val s = p.toString
      if (s.exists(ch => ch == '%' || ch == '_' || ch == '\\')) fail("startswith/endswith/contains of a pattern with % _ or \\")
      else translate(str).map(x => s"($x LIKE ${quote(make(s))})")
    case _ => fail("startswith/endswith/contains with a non-literal pattern")
  }

  private def literal(l: Literal): R = {
    if (l.value == null) {
      return l.dataType match {
        case NullType => Right("NULL")
        case dt => Types.contractType(dt).map(t => s"CAST(NULL AS $t)").left.map(identity)
      }
    }
    l.dataType match {
      case BooleanType => Right(if (l.value.asInstanceOf[Boolean]) "TRUE" else "FALSE")
      case IntegerType => Right(l.value.toString)
      case LongType => Right(s"CAST(${l.value} AS int64)")
      case DoubleType =>
        val d = l.value.asInstanceOf[Double]
        if (d.isNaN || d.isInfinite) fail(s"literal $d")
        else {
          val s = java.lang.Double.toString(d)
          Right(if (s.contains("E")) s else s + "E0") // an exponent makes it float64 (contract)
        }
      case d: DecimalType =>
        val v = l.value.asInstanceOf[Decimal].toJavaBigDecimal.setScale(d.scale)
        Right(s"CAST(${v.toPlainString} AS decimal(${d.precision},${d.scale}))")
      case _: StringType => Right(quote(l.value.toString))
      case DateType => Right(io.jumpgate.core.request.Expr.dateOfEpochDay(l.value.asInstanceOf[Int].toLong))
      case dt => fail(s"literal of type ${dt.simpleString}")
    }
  }
}

object ExprTranslator {
  def quote(s: String): String = io.jumpgate.core.request.Expr.quote(s)
  def ident(s: String): String = io.jumpgate.core.request.Expr.ident(s)
  def name(e: Expression): String = e.prettyName
}
