package io.jumpgate.core.receive;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import io.jumpgate.core.ntf.Le;

/**
 * Reads one TCP stream as contract section 3 frames it: an 8-byte header ({@code NTF1}, u32 stream
 * id), frames {@code [u32 L][L bytes]} with 1 <= L < 2^31, then the end marker {@code u32 0, u64
 * count} and end-of-file. Any departure is an {@link NtfStreamException} that says what and where;
 * the stream is then failed whole (never a partial answer).
 *
 * <p>Frames are read into chunks of growing size (64 KiB first, up to 4 MiB), each holding whole
 * frames only, so readers decode them in place. Separate from the sockets so it can be tested on
 * byte vectors.
 */
public final class StreamFraming {
  public static final byte[] MAGIC = "NTF1".getBytes(StandardCharsets.US_ASCII);
  public static final int HEADER_SIZE = 8;
  public static final int END_MARKER_SIZE = 12;
  public static final int FIRST_CHUNK_SIZE = 64 << 10;
  public static final int CHUNK_SIZE = 4 << 20;

  /** Accounts for buffer memory as it is allocated; may refuse by throwing. */
  @FunctionalInterface
  public interface Budget {
    void grow(long bytes) throws IOException;

    Budget UNLIMITED = n -> {};
  }

  private StreamFraming() {}

  /** The stream id of a header, or an exception naming what is wrong with it. */
  public static int parseHeader(byte[] head) throws NtfStreamException {
    if (head.length < HEADER_SIZE) throw new NtfStreamException("stream header has " + head.length + " of 8 bytes");
    if (!Arrays.equals(head, 0, 4, MAGIC, 0, 4))
      throw new NtfStreamException("bad stream header magic " + hex(head, 0, 4) + " (expected NTF1: 4e544631)");
    int id = Le.i32(head, 4);
    if (id < 0) throw new NtfStreamException("bad stream id " + (id & 0xFFFFFFFFL) + " in the stream header");
    return id;
  }

  /** Reads and checks the 8-byte header; the stream id. */
  public static int readHeader(InputStream in) throws IOException {
    byte[] head = new byte[HEADER_SIZE];
    int got = 0;
    while (got < HEADER_SIZE) {
      int n = in.read(head, got, HEADER_SIZE - got);
      if (n < 0) throw new NtfStreamException("stream ended inside its header after " + got + " of 8 bytes");
      got += n;
    }
    return parseHeader(head);
  }

  /**
   * Reads the frames and end marker of stream {@code id} (its header already read) to end-of-file.
   *
   * @param fixedSize the layout's fixed size: a shorter tuple breaks the stream (1 if unknown)
   * @param budget    charged for each buffer allocated
   */
  public static StreamData readFrames(InputStream in, int id, int fixedSize, Budget budget) throws IOException {
    List<Chunk> chunks = new ArrayList<>();
    StreamData s = readFrames(in, id, fixedSize, budget, CHUNK_SIZE, chunks::add);
    return new StreamData(id, List.copyOf(chunks), s.tuples(), s.bytes());
  }

  /**
   * Like {@link #readFrames(InputStream, int, int, Budget)}, handing each chunk to {@code sink} as
   * soon as it is full (at most {@code maxChunk} bytes, or one frame if larger) and the last one at
   * the end marker, so a reader may decode tuples while the stream still runs. The chunks handed
   * out before a failure were well framed, but the stream as a whole was not checked: a consumer
   * that used them must fail too. The returned StreamData has the counts and no chunks.
   */
  public static StreamData readFrames(InputStream in, int id, int fixedSize, Budget budget, int maxChunk,
                                      java.util.function.Consumer<Chunk> sink) throws IOException {
    int minLen = Math.max(1, fixedSize);
    byte[] buf = new byte[FIRST_CHUNK_SIZE];
    budget.grow(buf.length);
    int pos = 0; // bytes in buf
    int scan = 0; // start of the first frame not yet complete
    int chunkTuples = 0;
    long tuples = 0;
    long total = HEADER_SIZE;
    boolean ended = false;
    while (!ended) {
      if (pos == buf.length) { // full: keep the complete frames, move the partial one to a new chunk
        long need = pos - scan >= 4 ? 4 + Le.u32(buf, scan) : 4L;
        int size = (int) Math.max(Math.min((long) maxChunk, 2L * buf.length), need + 16);
        byte[] next = new byte[size];
        System.arraycopy(buf, scan, next, 0, pos - scan);
        sink.accept(new Chunk(buf, scan, chunkTuples));
        budget.grow(size);
        pos -= scan;
        scan = 0;
        chunkTuples = 0;
        buf = next;
      }
      int n = in.read(buf, pos, buf.length - pos);
      if (n < 0) {
        String where = pos - scan == 0 ? "" : " (" + (pos - scan) + " bytes of an incomplete frame)";
        throw new NtfStreamException("stream " + id + " ended before its end marker after " + tuples + " tuples" + where);
      }
      pos += n;
      total += n;
      boolean more = true;
      while (more && pos - scan >= 4) {
        long len = Le.u32(buf, scan);
        if (len == 0) {
          if (pos - scan >= END_MARKER_SIZE) {
            long count = Le.u64(buf, scan + 4);
            if (count != tuples)
              throw new NtfStreamException("stream " + id + ": end marker counts " + count + " tuples, " + tuples + " arrived");
            if (pos - scan > END_MARKER_SIZE || in.read() >= 0)
              throw new NtfStreamException("stream " + id + ": data after the end marker");
            ended = true;
          }
          more = false;
        } else {
          if (len < minLen || len >= (1L << 31))
            throw new NtfStreamException("stream " + id + ": tuple " + tuples + " has length " + len
                + (len < minLen ? " (below the layout's fixed size " + minLen + ")" : " (2^31 or more)"));
          if (pos - scan >= 4 + len) {
            scan += 4 + (int) len;
            tuples++;
            chunkTuples++;
          } else {
            more = false;
          }
        }
      }
    }
    sink.accept(new Chunk(buf, scan, chunkTuples));
    return new StreamData(id, List.of(), tuples, total);
  }

  static String hex(byte[] b, int from, int to) {
    StringBuilder s = new StringBuilder();
    for (int i = from; i < Math.min(to, b.length); i++) s.append(String.format("%02x", b[i] & 0xff));
    return s.toString();
  }
}
