package io.jumpgate.spark.planner

import scala.jdk.CollectionConverters._

import io.jumpgate.core.ntf.NtfLayout
import io.jumpgate.core.request.ContractType

import org.apache.spark.sql.types._

/** Why something stays in Spark: `incompatible` means Jumpgate could run it, with different
 *  results in some cases (enable with spark.jumpgate.allowIncompatible); otherwise unsupported. */
final case class Why(message: String, incompatible: Boolean = false) {
  def label: String = if (incompatible) s"incompatible: $message" else message
}

object Types {
  /** The widest decimal of the contract's section 1 (1 <= p <= 18): an 8-byte NTF field, and the
   *  precision Jumpgate's arithmetic between such decimals stays within. */
  val MaxDecimalPrecision: Int = ContractType.MAX_DECIMAL_PRECISION

  /** The widest decimal at all: this implementation's wide decimals (19 <= p <= 38, a 16-byte NTF
   *  field; docs/contract.md, "Wide decimals"), which Spark's sums and averages of decimals buffer in. */
  val MaxWideDecimalPrecision: Int = ContractType.MAX_WIDE_DECIMAL_PRECISION

  /** The contract type name of a Spark type, or why there is none. */
  def contractType(dt: DataType): Either[Why, String] = coreType(dt).map(_.name)

  /** The contract type (jvm-core's [[ContractType]]) of a Spark type, or why there is none. */
  def coreType(dt: DataType): Either[Why, ContractType] = dt match {
    case BooleanType => Right(ContractType.BOOLEAN)
    case IntegerType => Right(ContractType.INT32)
    case LongType => Right(ContractType.INT64)
    case DoubleType => Right(ContractType.FLOAT64)
    case DateType => Right(ContractType.DATE)
    case d: DecimalType if d.precision <= MaxWideDecimalPrecision => Right(ContractType.decimal(d.precision, d.scale))
    case d: DecimalType => Left(Why(s"type ${d.simpleString}: NTF decimals have at most $MaxWideDecimalPrecision digits"))
    case s: StringType if s.collationId == 0 => Right(ContractType.STRING)
    case s: StringType => Left(Why(s"type ${s.typeName}: only the binary (UTF8_BINARY) string collation"))
    case other => Left(Why(s"type ${other.simpleString} has no contract type"))
  }

  def supported(dt: DataType): Boolean = contractType(dt).isRight

  /** Rejects (IllegalArgumentException) a layout whose fields do not carry `expected`, in order. */
  def checkLayout(layout: NtfLayout, expected: Seq[DataType]): Unit =
    layout.checkTypes(expected.map(dt => coreType(dt).fold(
      w => throw new IllegalArgumentException(s"no contract type for $dt: ${w.message}"), identity)).asJava)
}
