package io.jumpgate.core.ntf;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;

import io.jumpgate.core.request.ContractType;

/**
 * Typed, checked access to the fields of NTF tuples of one layout (contract section 2), for engine
 * decoders to build on. Stateless after construction (thread-safe), no allocation per value except
 * {@link #getString}: every accessor takes the buffer, the tuple's first byte {@code t} and a field
 * index, and reads little-endian at the layout's offset.
 *
 * <p>Checks that protect the engine from a corrupt tuple: a string's bytes must lie in the tuple's
 * variable section ({@link #stringOffset}), a decimal within its precision ({@link #getDecimal}, and
 * {@link #getWideDecimal} for a 16-byte decimal of more than 18 digits).
 * Accessors do not check the field's type: decoders choose the accessor from
 * {@link NtfLayout#field(int)}.type() once per column, not per value.
 */
public final class NtfReader {
  private final NtfLayout layout;
  private final int[] offset;
  private final int[] nullByte;
  private final int[] nullMask;
  private final long[] decimalLimit;
  private final BigInteger[] wideLimit;

  public NtfReader(NtfLayout layout) {
    this.layout = layout;
    int n = layout.size();
    offset = new int[n];
    nullByte = new int[n];
    nullMask = new int[n];
    decimalLimit = new long[n];
    wideLimit = new BigInteger[n];
    for (int i = 0; i < n; i++) {
      NtfField f = layout.field(i);
      offset[i] = f.offset();
      nullByte[i] = f.nullByte();
      nullMask[i] = f.nullMask();
      if (f.type().isWideDecimal()) wideLimit[i] = BigInteger.TEN.pow(f.type().precision());
      else if (f.type().kind() == ContractType.Kind.DECIMAL) decimalLimit[i] = pow10(f.type().precision());
    }
  }

  /** 10^p: the bound an unscaled decimal(p, s) value stays strictly inside. */
  public static long pow10(int p) {
    long v = 1;
    for (int i = 0; i < p; i++) v *= 10;
    return v;
  }

  public NtfLayout layout() {
    return layout;
  }

  public int fieldCount() {
    return offset.length;
  }

  /** The absolute offset of field {@code f} of the tuple at {@code t}. */
  public int fieldOffset(int t, int f) {
    return t + offset[f];
  }

  public boolean isNull(byte[] b, int t, int f) {
    return (b[t + nullByte[f]] & nullMask[f]) != 0;
  }

  public boolean getBoolean(byte[] b, int t, int f) {
    return b[t + offset[f]] != 0;
  }

  /** int32, or a date as days since 1970-01-01. */
  public int getInt(byte[] b, int t, int f) {
    return Le.i32(b, t + offset[f]);
  }

  public long getLong(byte[] b, int t, int f) {
    return Le.i64(b, t + offset[f]);
  }

  public double getDouble(byte[] b, int t, int f) {
    return Le.f64(b, t + offset[f]);
  }

  /** A decimal's unscaled value; NtfFormatException when it has more digits than its precision. */
  public long getDecimal(byte[] b, int t, int f) {
    long v = Le.i64(b, t + offset[f]);
    long limit = decimalLimit[f];
    if (v >= limit || v <= -limit)
      throw NtfFormatException.corrupt("decimal field " + layout.field(f).name() + " exceeds its precision", t);
    return v;
  }

  /**
   * A wide decimal's unscaled value (a field of {@code decimal(p,s)} with p > 18: 16 bytes, little-endian
   * two's complement); NtfFormatException when it has more digits than its precision.
   */
  public BigInteger getWideDecimal(byte[] b, int t, int f) {
    int at = t + offset[f];
    byte[] be = new byte[16]; // BigInteger takes big-endian bytes
    for (int i = 0; i < 16; i++) be[i] = b[at + 15 - i];
    BigInteger v = new BigInteger(be);
    BigInteger limit = wideLimit[f];
    if (v.abs().compareTo(limit) >= 0)
      throw NtfFormatException.corrupt("decimal field " + layout.field(f).name() + " exceeds its precision", t);
    return v;
  }

  /** A decimal field of either width as a BigDecimal of its scale. */
  public BigDecimal getBigDecimal(byte[] b, int t, int f) {
    ContractType type = layout.field(f).type();
    BigInteger unscaled = type.isWideDecimal() ? getWideDecimal(b, t, f) : BigInteger.valueOf(getDecimal(b, t, f));
    return new BigDecimal(unscaled, type.scale());
  }

  /** A string's length in bytes (non-negative once {@link #stringOffset} accepted it). */
  public int stringLength(byte[] b, int t, int f) {
    return Le.i32(b, t + offset[f] + 4);
  }

  /**
   * The absolute offset in {@code b} of a string's bytes, checked to lie in the variable section
   * of the tuple at {@code t} whose length is {@code len}. An empty string may have any offset.
   */
  public int stringOffset(byte[] b, int t, int len, int f) {
    int so = Le.i32(b, t + offset[f]);
    int sl = Le.i32(b, t + offset[f] + 4);
    if (sl < 0 || (sl > 0 && (so < layout.fixedSize() || so > len - sl)))
      throw NtfFormatException.corrupt("string field " + layout.field(f).name() + " outside the variable section", t);
    return t + so;
  }

  /** A string as a Java String (allocates; engines that keep UTF-8 should copy the bytes instead). */
  public String getString(byte[] b, int t, int len, int f) {
    int at = stringOffset(b, t, len, f);
    return new String(b, at, stringLength(b, t, f), StandardCharsets.UTF_8);
  }

  /** Rejects a tuple shorter than the layout's fixed part. */
  public void checkLength(int t, int len) {
    if (len < layout.fixedSize())
      throw NtfFormatException.corrupt("length " + len + " is below the layout's fixed size " + layout.fixedSize(), t);
  }
}
