package io.jumpgate.core.request;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Map;
import java.util.Optional;

/**
 * A small JSON writer for request bodies. Values: null, String, Boolean, Integer/Long/Short/Byte,
 * finite Double/Float, BigDecimal/BigInteger, {@link RawJson}, {@link JsonObject}, java.util.Map
 * (its iteration order), Iterable, Object[] and Optional. Anything else is an error rather than its
 * toString(): a request must never carry text nobody meant to send.
 */
public final class Json {
  private Json() {}

  public static String write(Object v) {
    StringBuilder b = new StringBuilder();
    write(b, v);
    return b.toString();
  }

  public static void write(StringBuilder b, Object v) {
    if (v == null) b.append("null");
    else if (v instanceof String s) str(b, s);
    else if (v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof Short
        || v instanceof Byte || v instanceof BigInteger) b.append(v);
    else if (v instanceof Double || v instanceof Float) {
      double d = ((Number) v).doubleValue();
      if (Double.isNaN(d) || Double.isInfinite(d)) throw new IllegalArgumentException("JSON has no " + d);
      b.append(v);
    } else if (v instanceof BigDecimal d) b.append(d.toPlainString());
    else if (v instanceof RawJson r) b.append(r.text());
    else if (v instanceof JsonObject o) obj(b, o.fields());
    else if (v instanceof Map<?, ?> m) obj(b, m);
    else if (v instanceof Optional<?> o) write(b, o.orElse(null));
    else if (v instanceof Iterable<?> it) {
      b.append('[');
      boolean first = true;
      for (Object x : it) {
        if (!first) b.append(',');
        first = false;
        write(b, x);
      }
      b.append(']');
    } else if (v instanceof Object[] a) write(b, java.util.Arrays.asList(a));
    else throw new IllegalArgumentException("no JSON form for a " + v.getClass().getName() + ": " + v);
  }

  private static void obj(StringBuilder b, Map<?, ?> m) {
    b.append('{');
    boolean first = true;
    for (Map.Entry<?, ?> e : m.entrySet()) {
      if (!first) b.append(',');
      first = false;
      str(b, String.valueOf(e.getKey()));
      b.append(':');
      write(b, e.getValue());
    }
    b.append('}');
  }

  /** A JSON string literal. */
  public static String str(String s) {
    StringBuilder b = new StringBuilder(s.length() + 2);
    str(b, s);
    return b.toString();
  }

  private static void str(StringBuilder b, String s) {
    b.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> b.append("\\\"");
        case '\\' -> b.append("\\\\");
        case '\n' -> b.append("\\n");
        case '\r' -> b.append("\\r");
        case '\t' -> b.append("\\t");
        default -> {
          if (c < ' ') b.append(String.format("\\u%04x", (int) c));
          else b.append(c);
        }
      }
    }
    b.append('"');
  }
}
