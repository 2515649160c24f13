package io.jumpgate.spark.planner

import org.apache.spark.sql.types._

/** Why something stays in Spark: `incompatible` means Jumpgate could run it, with different
 *  results in some cases (enable with spark.jumpgate.allowIncompatible); otherwise unsupported. */
final case class Why(message: String, incompatible: Boolean = false) {
  def label: String = if (incompatible) s"incompatible: $message" else message
}

object Types {
  /** The widest decimal an NTF field carries (contract section 1: 1 <= p <= 18). */
  val MaxDecimalPrecision = 18

  /** The contract type name of a Spark type, or why there is none. */
  def contractType(dt: DataType): Either[Why, String] = dt match {
    case BooleanType => Right("boolean")
    case IntegerType => Right("int32")
    case LongType => Right("int64")
    case DoubleType => Right("float64")
    case DateType => Right("date")
    case d: DecimalType if d.precision <= MaxDecimalPrecision => Right(s"decimal(${d.precision},${d.scale})")
    case d: DecimalType => Left(Why(s"type ${d.simpleString}: NTF decimals have at most $MaxDecimalPrecision digits"))
    case s: StringType if s.collationId == 0 => Right("string")
    case s: StringType => Left(Why(s"type ${s.typeName}: only the binary (UTF8_BINARY) string collation"))
    case other => Left(Why(s"type ${other.simpleString} has no contract type"))
  }

  def supported(dt: DataType): Boolean = contractType(dt).isRight
}
