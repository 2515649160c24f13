package io.jumpgate.core.request;

import java.time.LocalDate;

/**
 * Pieces of contract expression text (contract section 1, "Expressions"). Identifiers and string
 * literals are always quoted here, so no engine's column name or constant can change the meaning
 * of the expression around it.
 */
public final class Expr {
  private Expr() {}

  /** A double-quoted identifier ({@code "} doubled inside). */
  public static String ident(String name) {
    return "\"" + name.replace("\"", "\"\"") + "\"";
  }

  /** A single-quoted string literal ({@code '} doubled inside). */
  public static String quote(String s) {
    return "'" + s.replace("'", "''") + "'";
  }

  public static String date(LocalDate d) {
    return "DATE '" + d + "'";
  }

  /** A date literal from days since 1970-01-01 (the NTF and Spark form of a date). */
  public static String dateOfEpochDay(long days) {
    return date(LocalDate.ofEpochDay(days));
  }

  public static String cast(String expr, String contractType) {
    return "CAST(" + expr + " AS " + contractType + ")";
  }

  public static String cast(String expr, ContractType type) {
    return cast(expr, type.name());
  }
}
