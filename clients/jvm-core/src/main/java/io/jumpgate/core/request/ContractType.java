package io.jumpgate.core.request;

import java.io.Serializable;
import java.util.Locale;

/**
 * A type of the contract (section 1, "Types"): boolean, int32, int64, float64, decimal(p,s) with
 * 1 <= p <= 18, string, date; and this implementation's wide decimals, decimal(p,s) with
 * 19 <= p <= 38 (docs/contract.md, "Wide decimals"), which only arise where a request names them.
 * Also its NTF field size (section 2). Engines map their own types to these; the mapping itself
 * stays in each engine's glue.
 */
public final class ContractType implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The widest contract section 1 decimal (an unscaled value in 8 bytes); wider ones are wide decimals. */
  public static final int MAX_DECIMAL_PRECISION = 18;

  /** The widest wide decimal (an unscaled two's-complement value in 16 bytes). */
  public static final int MAX_WIDE_DECIMAL_PRECISION = 38;

  public enum Kind { BOOLEAN, INT32, INT64, FLOAT64, DECIMAL, STRING, DATE }

  public static final ContractType BOOLEAN = new ContractType(Kind.BOOLEAN, 0, 0);
  public static final ContractType INT32 = new ContractType(Kind.INT32, 0, 0);
  public static final ContractType INT64 = new ContractType(Kind.INT64, 0, 0);
  public static final ContractType FLOAT64 = new ContractType(Kind.FLOAT64, 0, 0);
  public static final ContractType STRING = new ContractType(Kind.STRING, 0, 0);
  public static final ContractType DATE = new ContractType(Kind.DATE, 0, 0);

  private final Kind kind;
  private final int precision;
  private final int scale;

  private ContractType(Kind kind, int precision, int scale) {
    this.kind = kind;
    this.precision = precision;
    this.scale = scale;
  }

  /** decimal(p,s); an error outside 1 <= p <= 38, 0 <= s <= p (p > 18: a wide decimal). */
  public static ContractType decimal(int precision, int scale) {
    if (precision < 1 || precision > MAX_WIDE_DECIMAL_PRECISION || scale < 0 || scale > precision)
      throw new IllegalArgumentException("decimal(" + precision + "," + scale + "): the contract allows 1 <= p <= "
          + MAX_WIDE_DECIMAL_PRECISION + ", 0 <= s <= p");
    return new ContractType(Kind.DECIMAL, precision, scale);
  }

  /** Parses a type name as the contract and NTF layouts write it (case and spaces ignored). */
  public static ContractType parse(String text) {
    String t = text.replace(" ", "").toLowerCase(Locale.ROOT);
    switch (t) {
      case "boolean": return BOOLEAN;
      case "int32": return INT32;
      case "int64": return INT64;
      case "float64": return FLOAT64;
      case "string": return STRING;
      case "date": return DATE;
      default:
    }
    if (t.startsWith("decimal(") && t.endsWith(")")) {
      String[] ps = t.substring(8, t.length() - 1).split(",", -1);
      try {
        if (ps.length == 2) return decimal(Integer.parseInt(ps[0]), Integer.parseInt(ps[1]));
      } catch (NumberFormatException e) {
        // fall through to the error below
      }
    }
    throw new IllegalArgumentException("not a contract type: " + text);
  }

  public Kind kind() {
    return kind;
  }

  /** Decimal digits (decimal only; 0 otherwise). */
  public int precision() {
    return precision;
  }

  public int scale() {
    return scale;
  }

  /** A decimal of more than 18 digits: 16 bytes in NTF, read with NtfReader.getWideDecimal. */
  public boolean isWideDecimal() {
    return kind == Kind.DECIMAL && precision > MAX_DECIMAL_PRECISION;
  }

  /** The bytes of the field in an NTF tuple's fixed part (a string's are its offset and length). */
  public int ntfSize() {
    return switch (kind) {
      case BOOLEAN -> 1;
      case INT32, DATE -> 4;
      case DECIMAL -> isWideDecimal() ? 16 : 8;
      default -> 8;
    };
  }

  /** The contract's spelling: "int64", "decimal(12,2)". */
  public String name() {
    return kind == Kind.DECIMAL ? "decimal(" + precision + "," + scale + ")" : kind.name().toLowerCase(Locale.ROOT);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ContractType c && c.kind == kind && c.precision == precision && c.scale == scale;
  }

  @Override
  public int hashCode() {
    return kind.hashCode() * 31 + precision * 7 + scale;
  }

  @Override
  public String toString() {
    return name();
  }
}
