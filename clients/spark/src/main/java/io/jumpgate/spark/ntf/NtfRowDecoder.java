package io.jumpgate.spark.ntf;

import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;

import io.jumpgate.core.ntf.NtfFormatException;

/**
 * Decodes one NTF tuple (contract section 2) into the current row of an {@link UnsafeRowWriter}.
 * Subclasses are generated per layout by {@link NtfDecoders} (Janino): every field's offset, null
 * bit and type are constants in the generated code, so decoding a tuple is a straight run of loads
 * and stores with no per-field dispatch.
 */
public abstract class NtfRowDecoder {
  /**
   * @param b   the bytes holding the tuple
   * @param t   the tuple's first byte in {@code b}
   * @param len the tuple's length (fixed part and variable section)
   * @param w   a writer whose row has one field per layout field, in layout order
   */
  public abstract void decode(byte[] b, int t, int len, UnsafeRowWriter w);

  /** Thrown by generated code for a tuple that breaks its layout. */
  protected static RuntimeException corrupt(String what, int t) {
    return NtfFormatException.corrupt(what, t);
  }
}
