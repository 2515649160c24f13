package io.jumpgate.core.receive;

import java.io.IOException;
import java.io.InputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import io.jumpgate.core.Log;

/**
 * One {@code send} destination: a listening socket, its streams, their buffers. Made by {@link ReceiverService#open}.
 *
 * <p>Buffered (the default): each stream's chunks are kept until it ends and is checked, and
 * {@link #data()} hands out complete streams only. Streaming: each chunk is queued for {@link
 * #poll()} as soon as it is read, and its memory is given back when the reader calls {@link
 * #consumed}; an engine that fails the whole query when a stream fails later (Trino) reads rows
 * while the job still runs.
 */
public final class Destination {
  /** Chunks of a streaming destination are handed out at this size at most, so rows flow early. */
  static final int STREAM_CHUNK_SIZE = 1 << 20;
  private final ReceiverService service;
  private final String key;
  private final int index;
  private final ServerSocket server;
  private final long maxBytes;
  private final String capName;
  private final int port;
  volatile String jobId;
  private volatile int expected = -1;
  private volatile int fixedSize = 1;
  private final CountDownLatch expectedSet = new CountDownLatch(1);
  private final CountDownLatch done = new CountDownLatch(1);
  private final AtomicReference<String> error = new AtomicReference<>();
  private volatile boolean closed;
  private final Map<Integer, StreamData> streams = new ConcurrentHashMap<>();
  private final Set<Socket> sockets = ConcurrentHashMap.newKeySet();
  /** Stream ids whose senders presented a valid header; the listener closes once all are in. */
  private final Set<Integer> claimed = ConcurrentHashMap.newKeySet();
  private final AtomicLong myBytes = new AtomicLong();
  private final AtomicInteger reads = new AtomicInteger();
  private final boolean streaming;
  private final ConcurrentLinkedQueue<Chunk> ready = new ConcurrentLinkedQueue<>();
  private volatile CompletableFuture<Void> arrival = new CompletableFuture<>();

  Destination(ReceiverService service, String key, int index, ServerSocket server, long maxBytes, String capName,
              boolean streaming) {
    this.streaming = streaming;
    this.service = service;
    this.key = key;
    this.index = index;
    this.server = server;
    this.maxBytes = maxBytes;
    this.capName = capName;
    this.port = server.getLocalPort();
  }

  public String key() {
    return key;
  }

  public int index() {
    return index;
  }

  public int port() {
    return port;
  }

  /** How many times the engine has read this destination (it may compute an output more than once). */
  public AtomicInteger reads() {
    return reads;
  }

  /** Why this destination failed ("destination KEY[i] (job J): ..."), if it did. */
  public Optional<String> failure() {
    return Optional.ofNullable(error.get());
  }

  public boolean isComplete() {
    return expected >= 0 && streams.size() == expected && error.get() == null;
  }

  /** Expect {@code n} streams whose tuples are at least {@code fixed} bytes. */
  public void expect(int n, int fixed) {
    fixedSize = Math.max(1, fixed);
    expected = n;
    expectedSet.countDown();
    if (n == 0) done.countDown();
    checkDone();
  }

  /** Waits until complete, failed or closed; false on timeout. */
  public boolean await(long nanos) throws InterruptedException {
    return done.await(nanos, TimeUnit.NANOSECONDS);
  }

  public boolean isStreaming() {
    return streaming;
  }

  public boolean isClosed() {
    return closed;
  }

  /** Streaming: the next chunk received (in arrival order across streams), or null if none is waiting. */
  public Chunk poll() {
    return ready.poll();
  }

  /** Streaming: gives back the memory of a chunk taken with {@link #poll()} once it is decoded. */
  public void consumed(Chunk c) {
    long n = c.bytes().length;
    if (!closed && myBytes.addAndGet(-n) >= 0) service.buffered.addAndGet(-n);
  }

  /** Streaming: completes when a chunk is waiting, or the destination is complete, failed or closed. */
  public CompletableFuture<Void> whenReady() {
    if (!ready.isEmpty() || done.getCount() == 0) return CompletableFuture.completedFuture(null);
    CompletableFuture<Void> f;
    synchronized (this) {
      f = arrival;
      if (f.isDone()) {
        f = new CompletableFuture<>();
        arrival = f;
      }
    }
    // A chunk (or the end) that came while the future was replaced completed the old one: look again.
    if (!ready.isEmpty() || done.getCount() == 0) f.complete(null);
    return f;
  }

  private void offer(Chunk c) {
    if (closed) return;
    ready.add(c);
    arrival.complete(null);
  }

  /** The streams in stream-id order; only once complete. */
  public List<StreamData> data() throws IOException {
    if (!isComplete())
      throw new IOException("Jumpgate destination " + name() + " is not complete: "
          + failure().orElse(streams.size() + " of " + expected + " streams ended"));
    List<StreamData> out = new ArrayList<>(expected);
    for (int i = 0; i < expected; i++) out.add(streams.get(i));
    return out;
  }

  private String name() {
    String j = jobId;
    return key + "[" + index + "]" + (j == null ? "" : " (job " + j + ")");
  }

  void fail(String msg) {
    String full = "destination " + name() + ": " + msg;
    if (error.compareAndSet(null, full)) {
      Log.warn("Jumpgate " + full);
      done.countDown();
      arrival.complete(null);
    }
  }

  private void checkDone() {
    if (expected >= 0 && streams.size() == expected) {
      done.countDown();
      arrival.complete(null);
    }
  }

  void startAccepting() {
    service.thread("accept-" + index, () -> {
      try {
        server.setSoTimeout(ReceiverService.POLL_MS);
        // Listen until every expected stream id has been claimed by a valid header. A connection
        // does not count until then: a port is a number the kernel hands out again, so a sender
        // left over from another job (or anything else on the host) may connect here; it is
        // closed and ignored, and must not make the listener stop before the real senders are in.
        while (!closed && (expected < 0 || claimed.size() < expected)) {
          try {
            Socket s = server.accept();
            sockets.add(s);
            if (closed) s.close();
            else service.thread("recv-" + index, () -> read(s));
          } catch (SocketTimeoutException e) {
            // poll again
          }
        }
      } catch (IOException | RuntimeException e) {
        if (!closed) fail("accept failed: " + e);
      } finally {
        try {
          server.close();
        } catch (IOException e) {
          // closing anyway
        }
      }
    });
  }

  /** Closes the socket and the streams' connections, frees the buffers. Idempotent. */
  public void close() {
    closed = true;
    try {
      server.close();
    } catch (IOException e) {
      // closing anyway
    }
    for (Socket s : sockets) {
      try {
        s.close();
      } catch (IOException e) {
        // closing anyway
      }
    }
    done.countDown();
    service.buffered.addAndGet(-myBytes.getAndSet(0));
    streams.clear();
    ready.clear();
    arrival.complete(null);
  }

  private void grow(long n) throws IOException {
    myBytes.addAndGet(n);
    if (service.buffered.addAndGet(n) > maxBytes)
      throw new IOException("received data exceeds " + capName + " (" + maxBytes + " bytes)");
  }

  /**
   * Reads one stream: header, then frames, then the end marker. A connection whose header is not a
   * valid, unclaimed stream id of this destination is dropped: it is not one of ours.
   */
  private void read(Socket sock) {
    try {
      sock.setReceiveBufferSize(4 << 20);
      InputStream in = sock.getInputStream();
      sock.setSoTimeout(ReceiverService.HEADER_TIMEOUT_MS);
      int id;
      try {
        id = StreamFraming.readHeader(in);
        if (!expectedSet.await(60, TimeUnit.SECONDS)) id = -1;
        else if (id >= expected || !claimed.add(id)) id = -1;
      } catch (IOException e) {
        Log.debug(() -> "Jumpgate destination " + name() + ": ignored a connection from "
            + sock.getRemoteSocketAddress() + ": " + e.getMessage());
        return;
      }
      if (id < 0) {
        Log.debug(() -> "Jumpgate destination " + name() + ": ignored a connection from "
            + sock.getRemoteSocketAddress() + " (not an expected, unclaimed stream id)");
        return;
      }
      sock.setSoTimeout(0);
      StreamData s = streaming
          ? StreamFraming.readFrames(in, id, fixedSize, this::grow, STREAM_CHUNK_SIZE, this::offer)
          : StreamFraming.readFrames(in, id, fixedSize, this::grow);
      if (closed) return;
      streams.put(id, s);
      checkDone();
    } catch (IOException | RuntimeException e) {
      if (!closed) fail("stream from " + sock.getRemoteSocketAddress() + ": " + e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      sockets.remove(sock);
      try {
        sock.close();
      } catch (IOException e) {
        // closing anyway
      }
    }
  }
}
