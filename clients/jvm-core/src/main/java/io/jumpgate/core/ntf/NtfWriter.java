package io.jumpgate.core.ntf;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * Builds NTF tuples and streams of a layout: for tests of decoders and receivers (engine suites
 * write byte vectors with it instead of by hand). Not used on the data path.
 */
public final class NtfWriter {
  private final NtfLayout layout;
  private byte[] fixed;
  private ByteArrayOutputStream var = new ByteArrayOutputStream();

  public NtfWriter(NtfLayout layout) {
    this.layout = layout;
    this.fixed = new byte[layout.fixedSize()];
  }

  public NtfWriter setNull(int f) {
    NtfField x = layout.field(f);
    fixed[x.nullByte()] |= (byte) x.nullMask();
    return this;
  }

  public NtfWriter setBoolean(int f, boolean v) {
    fixed[layout.field(f).offset()] = (byte) (v ? 1 : 0);
    return this;
  }

  public NtfWriter setInt(int f, int v) {
    Le.putI32(fixed, layout.field(f).offset(), v);
    return this;
  }

  public NtfWriter setLong(int f, long v) {
    Le.putI64(fixed, layout.field(f).offset(), v);
    return this;
  }

  public NtfWriter setDouble(int f, double v) {
    Le.putF64(fixed, layout.field(f).offset(), v);
    return this;
  }

  /** A wide decimal's (p > 18) unscaled value: 16 bytes, little-endian two's complement. */
  public NtfWriter setWideDecimal(int f, java.math.BigInteger unscaled) {
    int at = layout.field(f).offset();
    Le.putI64(fixed, at, unscaled.longValue());
    Le.putI64(fixed, at + 8, unscaled.shiftRight(64).longValue());
    return this;
  }

  public NtfWriter setString(int f, String v) {
    byte[] s = v.getBytes(StandardCharsets.UTF_8);
    int at = layout.fixedSize() + var.size();
    Le.putI32(fixed, layout.field(f).offset(), at);
    Le.putI32(fixed, layout.field(f).offset() + 4, s.length);
    var.writeBytes(s);
    return this;
  }

  /** The tuple built so far (fixed part, then variable section); starts a new one. */
  public byte[] finish() {
    byte[] v = var.toByteArray();
    byte[] t = new byte[fixed.length + v.length];
    System.arraycopy(fixed, 0, t, 0, fixed.length);
    System.arraycopy(v, 0, t, fixed.length, v.length);
    fixed = new byte[layout.fixedSize()];
    var = new ByteArrayOutputStream();
    return t;
  }

  /** A whole stream (contract section 3): header, one frame per tuple, end marker with the count. */
  public static byte[] stream(int streamId, byte[]... tuples) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    byte[] head = new byte[8];
    head[0] = 'N';
    head[1] = 'T';
    head[2] = 'F';
    head[3] = '1';
    Le.putI32(head, 4, streamId);
    out.writeBytes(head);
    out.writeBytes(frames(tuples));
    byte[] end = new byte[12];
    Le.putI64(end, 4, tuples.length);
    out.writeBytes(end);
    return out.toByteArray();
  }

  /** Frames only: {@code [u32 length][tuple]} per tuple. */
  public static byte[] frames(byte[]... tuples) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    byte[] len = new byte[4];
    for (byte[] t : tuples) {
      Le.putI32(len, 0, t.length);
      out.writeBytes(len);
      out.writeBytes(t);
    }
    return out.toByteArray();
  }
}
