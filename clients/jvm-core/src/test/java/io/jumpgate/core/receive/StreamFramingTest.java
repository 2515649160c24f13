package io.jumpgate.core.receive;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;

import org.junit.jupiter.api.Test;

import io.jumpgate.core.ntf.FrameCursor;
import io.jumpgate.core.ntf.Le;
import io.jumpgate.core.ntf.NtfWriter;

class StreamFramingTest {
  static StreamData read(byte[] stream, int fixedSize) throws IOException {
    InputStream in = new ByteArrayInputStream(stream);
    int id = StreamFraming.readHeader(in);
    return StreamFraming.readFrames(in, id, fixedSize, StreamFraming.Budget.UNLIMITED);
  }

  static String error(byte[] stream, int fixedSize) {
    return assertThrows(NtfStreamException.class, () -> read(stream, fixedSize)).getMessage();
  }

  static byte[] tuple(int size, int fill) {
    byte[] t = new byte[size];
    Arrays.fill(t, (byte) fill);
    return t;
  }

  @Test
  void aWellFormedStream() throws IOException {
    // Hand-written: header NTF1 + id 3, two frames, end marker with count 2.
    byte[] s = {'N', 'T', 'F', '1', 3, 0, 0, 0,
        8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
        8, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9,
        0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
    StreamData d = read(s, 8);
    assertEquals(3, d.id());
    assertEquals(2, d.tuples());
    assertEquals(s.length, d.bytes());
    assertEquals(1, d.chunks().size());
    Chunk c = d.chunks().get(0);
    assertEquals(2, c.tuples());
    FrameCursor cur = new FrameCursor(c.bytes(), 0, c.end());
    assertTrue(cur.next());
    assertEquals(1, c.bytes()[cur.tupleStart()]);
    assertTrue(cur.next());
    assertEquals(9, c.bytes()[cur.tupleStart()]);
    assertTrue(!cur.next());
  }

  @Test
  void anEmptyStream() throws IOException {
    StreamData d = read(NtfWriter.stream(0), 8);
    assertEquals(0, d.tuples());
    assertEquals(20, d.bytes());
  }

  @Test
  void framesSpillIntoLargerChunksWithoutStraddling() throws IOException {
    int n = 5000; // 5000 x 100 bytes: more than the first 64 KiB chunk
    byte[][] ts = new byte[n][];
    for (int i = 0; i < n; i++) ts[i] = tuple(96, i);
    StreamData d = read(NtfWriter.stream(1, ts), 96);
    assertEquals(n, d.tuples());
    assertTrue(d.chunks().size() > 1);
    int seen = 0;
    for (Chunk c : d.chunks()) {
      FrameCursor cur = new FrameCursor(c.bytes(), 0, c.end());
      int inChunk = 0;
      while (cur.next()) {
        assertEquals((byte) seen, c.bytes()[cur.tupleStart()]);
        seen++;
        inChunk++;
      }
      assertEquals(c.tuples(), inChunk);
    }
    assertEquals(n, seen);
  }

  @Test
  void aTupleLargerThanAChunk() throws IOException {
    byte[] big = tuple(200_000, 7);
    StreamData d = read(NtfWriter.stream(0, tuple(8, 1), big, tuple(8, 2)), 8);
    assertEquals(3, d.tuples());
  }

  @Test
  void truncatedInsideAFrame() {
    byte[] s = NtfWriter.stream(2, tuple(16, 1), tuple(16, 2));
    byte[] cut = Arrays.copyOf(s, 8 + 20 + 10);
    String e = error(cut, 16);
    assertTrue(e.contains("stream 2 ended before its end marker after 1 tuples (10 bytes of an incomplete frame)"), e);
  }

  @Test
  void truncatedInsideTheEndMarker() {
    byte[] s = NtfWriter.stream(0, tuple(16, 1));
    String e = error(Arrays.copyOf(s, s.length - 4), 16);
    assertTrue(e.contains("ended before its end marker after 1 tuples"), e);
  }

  @Test
  void truncatedHeader() {
    String e = assertThrows(NtfStreamException.class,
        () -> StreamFraming.readHeader(new ByteArrayInputStream(new byte[] {'N', 'T', 'F'}))).getMessage();
    assertTrue(e.contains("ended inside its header after 3 of 8 bytes"), e);
  }

  @Test
  void badMagic() {
    byte[] s = NtfWriter.stream(0, tuple(16, 1));
    s[3] = '2';
    String e = error(s, 16);
    assertTrue(e.contains("bad stream header magic 4e544632 (expected NTF1"), e);
  }

  @Test
  void negativeStreamId() {
    byte[] s = NtfWriter.stream(-1);
    assertTrue(error(s, 1).contains("bad stream id 4294967295"));
  }

  @Test
  void aLengthBelowTheFixedSize() {
    String e = error(NtfWriter.stream(4, tuple(16, 1), tuple(8, 2)), 16);
    assertTrue(e.contains("stream 4: tuple 1 has length 8 (below the layout's fixed size 16)"), e);
  }

  @Test
  void aLengthOf2To31OrMore() {
    byte[] s = NtfWriter.stream(0, tuple(16, 1));
    Le.putI32(s, 8, 0x8000_0000);
    String e = error(s, 16);
    assertTrue(e.contains("tuple 0 has length 2147483648 (2^31 or more)"), e);
  }

  @Test
  void aCountThatDisagrees() {
    byte[] s = NtfWriter.stream(0, tuple(16, 1), tuple(16, 2));
    Le.putI64(s, s.length - 8, 3);
    String e = error(s, 16);
    assertTrue(e.contains("end marker counts 3 tuples, 2 arrived"), e);
  }

  @Test
  void dataAfterTheEndMarker() {
    byte[] s = NtfWriter.stream(0, tuple(16, 1));
    byte[] more = Arrays.copyOf(s, s.length + 1);
    assertTrue(error(more, 16).contains("data after the end marker"));
  }

  @Test
  void theBudgetCanRefuse() {
    byte[] s = NtfWriter.stream(0, tuple(16, 1));
    InputStream in = new ByteArrayInputStream(s, 8, s.length - 8);
    IOException e = assertThrows(IOException.class, () -> StreamFraming.readFrames(in, 0, 16, n -> {
      throw new IOException("over the cap");
    }));
    assertEquals("over the cap", e.getMessage());
  }
}
