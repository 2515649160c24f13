package io.jumpgate.core.receive;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.jumpgate.core.Log;

import io.jumpgate.core.ntf.NtfWriter;

/** The service over loopback sockets: what a sender NCA does, byte for byte. */
class ReceiverServiceTest {
  static final List<String> warnings = new java.util.concurrent.CopyOnWriteArrayList<>();

  @BeforeAll
  static void quiet() { // the failures these tests provoke are asserted, not printed
    Log.setSink(new Log.Sink() {
      @Override
      public void warn(String message) {
        warnings.add(message);
      }

      @Override
      public void debug(String message) {}

      @Override
      public boolean debugEnabled() {
        return false;
      }
    });
  }

  @AfterAll
  static void loud() {
    Log.setSink(null);
  }

  static void send(int port, byte[] bytes) throws IOException {
    try (Socket s = new Socket("127.0.0.1", port)) {
      OutputStream out = s.getOutputStream();
      out.write(bytes);
      out.flush();
    }
  }

  static byte[] tuple(int n) {
    byte[] t = new byte[16];
    t[8] = (byte) n;
    return t;
  }

  @Test
  void twoStreamsMakeADestinationComplete() throws Exception {
    ReceiverService svc = ReceiverService.create();
    List<Integer> ports = svc.open("k1", 1, "127.0.0.1", 1 << 30);
    svc.expect("k1", List.of(2), List.of(16));
    send(ports.get(0), NtfWriter.stream(1, tuple(3)));
    send(ports.get(0), NtfWriter.stream(0, tuple(1), tuple(2)));
    assertTrue(svc.await("k1", 10_000));
    Destination d = svc.destination("k1", 0).orElseThrow();
    List<StreamData> data = d.data();
    assertEquals(2, data.get(0).tuples());
    assertEquals(1, data.get(1).tuples());
    assertTrue(svc.bufferedBytes() > 0);
    svc.release("k1");
    assertEquals(0, svc.openDestinations());
    assertEquals(0, svc.bufferedBytes());
  }

  @Test
  void streamsThatComeBeforeExpectWaitForIt() throws Exception {
    // A job started in the call that compiled it (POST /v1/jobs?execute=true) may send before the
    // client has read the answer's layouts: the streams are held, not failed, until expect().
    ReceiverService svc = ReceiverService.create();
    List<Integer> ports = svc.open("k0", 1, "127.0.0.1", 1 << 30);
    send(ports.get(0), NtfWriter.stream(0, tuple(1), tuple(2)));
    send(ports.get(0), NtfWriter.stream(1, tuple(3)));
    assertFalse(svc.await("k0", 200));
    svc.expect("k0", List.of(2), List.of(16));
    assertTrue(svc.await("k0", 10_000));
    assertTrue(svc.failure("k0").isEmpty());
    List<StreamData> data = svc.destination("k0", 0).orElseThrow().data();
    assertEquals(3, data.stream().mapToLong(StreamData::tuples).sum());
    svc.release("k0");
  }

  @Test
  void aTruncatedStreamFailsTheDestinationWithTheJobId() throws Exception {
    ReceiverService svc = ReceiverService.create();
    List<Integer> ports = svc.open("k2", 1, "127.0.0.1", 1 << 30);
    svc.attachJob("k2", "job-42");
    svc.expect("k2", List.of(1), List.of(16));
    byte[] s = NtfWriter.stream(0, tuple(1), tuple(2));
    send(ports.get(0), Arrays.copyOf(s, s.length - 20));
    assertFalse(svc.await("k2", 10_000));
    String why = svc.failure("k2").orElseThrow();
    assertTrue(why.contains("k2[0] (job job-42)"), why);
    assertTrue(why.contains("stream 0 ended before its end marker after 1 tuples"), why);
    assertTrue(warnings.stream().anyMatch(w -> w.contains(why)), warnings.toString());
    assertThrows(IOException.class, () -> svc.destination("k2", 0).orElseThrow().data());
    svc.release("k2");
  }

  @Test
  void aConnectionWithABadHeaderIsIgnored() throws Exception {
    ReceiverService svc = ReceiverService.create();
    List<Integer> ports = svc.open("k3", 1, "127.0.0.1", 1 << 30);
    svc.expect("k3", List.of(1), List.of(16));
    send(ports.get(0), "GET / HTTP/1.1\r\n\r\n".getBytes());
    send(ports.get(0), NtfWriter.stream(5)); // not an expected stream id
    send(ports.get(0), NtfWriter.stream(0, tuple(1)));
    assertTrue(svc.await("k3", 10_000));
    assertTrue(svc.failure("k3").isEmpty());
    svc.release("k3");
  }

  @Test
  void theBufferCapFailsTheDestination() throws Exception {
    ReceiverService svc = ReceiverService.create();
    List<Integer> ports = svc.open("k4", 1, "127.0.0.1", 1000, "test.maxBytes");
    svc.expect("k4", List.of(1), List.of(16));
    send(ports.get(0), NtfWriter.stream(0, tuple(1)));
    assertFalse(svc.await("k4", 10_000));
    String why = svc.failure("k4").orElseThrow();
    assertTrue(why.contains("exceeds test.maxBytes (1000 bytes)"), why);
    svc.release("k4");
    assertEquals(0, svc.bufferedBytes());
  }

  @Test
  void zeroExpectedStreamsIsCompleteAtOnce() throws Exception {
    ReceiverService svc = ReceiverService.create();
    svc.open("k5", 2, "127.0.0.1", 1 << 20);
    svc.expect("k5", List.of(0, 0), List.of(8, 8));
    assertTrue(svc.await("k5", 1000));
    assertEquals(List.of(), svc.destination("k5", 1).orElseThrow().data());
    svc.release("k5");
  }

  @Test
  void aStreamingDestinationHandsOutChunksBeforeTheStreamEnds() throws Exception {
    ReceiverService svc = ReceiverService.create();
    List<Integer> ports = svc.open("s1", 1, "127.0.0.1", 1 << 30, "test.maxBytes", true);
    svc.expect("s1", List.of(1), List.of(16));
    Destination d = svc.destination("s1", 0).orElseThrow();
    assertTrue(d.isStreaming());
    java.util.concurrent.CompletableFuture<Void> waiting = d.whenReady();
    assertFalse(waiting.isDone());
    // 5000 tuples of 20 framed bytes: more than the first 64 KiB chunk, sent without the end marker yet.
    byte[][] tuples = new byte[5000][];
    for (int i = 0; i < tuples.length; i++) tuples[i] = tuple(i);
    byte[] whole = NtfWriter.stream(0, tuples);
    int marker = whole.length - StreamFraming.END_MARKER_SIZE;
    long total;
    try (Socket s = new Socket("127.0.0.1", ports.get(0))) {
      OutputStream out = s.getOutputStream();
      out.write(whole, 0, marker);
      out.flush();
      waiting.get(10, java.util.concurrent.TimeUnit.SECONDS); // a full chunk arrived while the stream runs
      Chunk first = d.poll();
      assertTrue(first != null && first.tuples() > 0 && first.tuples() < tuples.length, "a first chunk, not all");
      assertFalse(d.isComplete());
      total = first.tuples();
      long before = svc.bufferedBytes();
      d.consumed(first);
      assertEquals(before - first.bytes().length, svc.bufferedBytes());
      out.write(whole, marker, whole.length - marker);
      out.flush();
    }
    assertTrue(d.await(10_000_000_000L));
    assertTrue(d.isComplete());
    for (Chunk c; (c = d.poll()) != null; ) {
      total += c.tuples();
      d.consumed(c);
    }
    assertEquals(tuples.length, total); // every tuple once, across the chunks
    assertTrue(d.whenReady().isDone());
    svc.release("s1");
    assertEquals(0, svc.bufferedBytes());
  }

  @Test
  void aStreamingDestinationFailsWhenItsStreamBreaksAfterChunksWereHandedOut() throws Exception {
    ReceiverService svc = ReceiverService.create();
    List<Integer> ports = svc.open("s2", 1, "127.0.0.1", 1 << 30, "test.maxBytes", true);
    svc.expect("s2", List.of(1), List.of(16));
    Destination d = svc.destination("s2", 0).orElseThrow();
    byte[][] tuples = new byte[5000][];
    for (int i = 0; i < tuples.length; i++) tuples[i] = tuple(i);
    byte[] whole = NtfWriter.stream(0, tuples);
    send(ports.get(0), Arrays.copyOf(whole, whole.length - StreamFraming.END_MARKER_SIZE)); // no end marker
    assertTrue(d.await(10_000_000_000L));
    assertFalse(d.isComplete());
    assertTrue(d.failure().orElseThrow().contains("ended before its end marker"), d.failure().orElseThrow());
    assertTrue(d.poll() != null, "the chunks read before the break were handed out");
    assertTrue(d.whenReady().isDone());
    svc.release("s2");
  }
}
