package io.jumpgate.core.ntf;

/**
 * The tuples of one region of frames, indexed once, with typed accessors by (row, field): the shape
 * a columnar decoder wants. A Trino page decoder fills each column block in turn:
 *
 * <pre>{@code
 * NtfBatch batch = NtfBatch.index(reader, chunk.bytes(), 0, chunk.end());
 * for (int f = 0; f < reader.fieldCount(); f++)
 *   for (int r = 0; r < batch.size(); r++)
 *     if (batch.isNull(r, f)) builder.appendNull(); else BIGINT.writeLong(builder, batch.getLong(r, f));
 * }</pre>
 *
 * No value is boxed. Each tuple's length is checked against the layout's fixed size when indexed.
 */
public final class NtfBatch {
  private final NtfReader reader;
  private final byte[] buf;
  private final int[] starts;
  private final int[] lengths;
  private final int size;

  private NtfBatch(NtfReader reader, byte[] buf, int[] starts, int[] lengths, int size) {
    this.reader = reader;
    this.buf = buf;
    this.starts = starts;
    this.lengths = lengths;
    this.size = size;
  }

  /** Indexes the frames in {@code buf[start, end)}; {@code expected} (or -1) sizes the index. */
  public static NtfBatch index(NtfReader reader, byte[] buf, int start, int end, int expected) {
    int cap = Math.max(expected, 16);
    int[] s = new int[cap];
    int[] l = new int[cap];
    int n = 0;
    FrameCursor c = new FrameCursor(buf, start, end);
    while (c.next()) {
      reader.checkLength(c.tupleStart(), c.tupleLength());
      if (n == s.length) {
        s = java.util.Arrays.copyOf(s, n * 2);
        l = java.util.Arrays.copyOf(l, n * 2);
      }
      s[n] = c.tupleStart();
      l[n] = c.tupleLength();
      n++;
    }
    return new NtfBatch(reader, buf, s, l, n);
  }

  public static NtfBatch index(NtfReader reader, byte[] buf, int start, int end) {
    return index(reader, buf, start, end, -1);
  }

  /** Tuples in the batch. */
  public int size() {
    return size;
  }

  public byte[] buffer() {
    return buf;
  }

  public NtfReader reader() {
    return reader;
  }

  public int tupleStart(int row) {
    return starts[row];
  }

  public int tupleLength(int row) {
    return lengths[row];
  }

  public boolean isNull(int row, int f) {
    return reader.isNull(buf, starts[row], f);
  }

  public boolean getBoolean(int row, int f) {
    return reader.getBoolean(buf, starts[row], f);
  }

  public int getInt(int row, int f) {
    return reader.getInt(buf, starts[row], f);
  }

  public long getLong(int row, int f) {
    return reader.getLong(buf, starts[row], f);
  }

  public double getDouble(int row, int f) {
    return reader.getDouble(buf, starts[row], f);
  }

  public long getDecimal(int row, int f) {
    return reader.getDecimal(buf, starts[row], f);
  }

  /** A wide decimal's (p > 18) unscaled value. */
  public java.math.BigInteger getWideDecimal(int row, int f) {
    return reader.getWideDecimal(buf, starts[row], f);
  }

  /** Absolute offset of a string's bytes in {@link #buffer()}, checked. */
  public int stringOffset(int row, int f) {
    return reader.stringOffset(buf, starts[row], lengths[row], f);
  }

  public int stringLength(int row, int f) {
    return reader.stringLength(buf, starts[row], f);
  }

  public String getString(int row, int f) {
    return reader.getString(buf, starts[row], lengths[row], f);
  }
}
