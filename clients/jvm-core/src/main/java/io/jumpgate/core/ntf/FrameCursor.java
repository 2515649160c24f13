package io.jumpgate.core.ntf;

/**
 * Walks the frames ({@code [u32 length][tuple]}, contract section 3) of a region of a buffer, e.g.
 * one received {@link io.jumpgate.core.receive.Chunk}. After {@link #next()} returns true,
 * {@link #tupleStart()} and {@link #tupleLength()} locate the current tuple in {@link #buffer()}.
 * Reusable: {@link #reset} points it at another region. Not thread-safe.
 */
public final class FrameCursor {
  private byte[] buf;
  private int pos;
  private int end;
  private int tuple;
  private int length;

  public FrameCursor() {}

  public FrameCursor(byte[] buf, int start, int end) {
    reset(buf, start, end);
  }

  public FrameCursor reset(byte[] buf, int start, int end) {
    this.buf = buf;
    this.pos = start;
    this.end = end;
    this.tuple = -1;
    this.length = 0;
    return this;
  }

  /** Moves to the next tuple; false at the end of the region. A frame that overruns it is an error. */
  public boolean next() {
    if (pos >= end) return false;
    if (end - pos < 4) throw new NtfFormatException("truncated frame at byte " + pos + ": " + (end - pos) + " bytes left");
    long len = Le.u32(buf, pos);
    if (len == 0 || len > end - pos - 4L)
      throw new NtfFormatException("frame at byte " + pos + " has length " + len + ", " + (end - pos - 4) + " bytes left");
    tuple = pos + 4;
    length = (int) len;
    pos = tuple + length;
    return true;
  }

  public byte[] buffer() {
    return buf;
  }

  /** The current tuple's first byte in {@link #buffer()}. */
  public int tupleStart() {
    return tuple;
  }

  public int tupleLength() {
    return length;
  }
}
