package io.jumpgate.core.receive;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The receiver service of one JVM: it listens on behalf of the engine's tasks.
 *
 * <p>A job's output destination (one {@code send}; one Spark partition, one Trino split) gets its
 * own listening socket, opened before the job is submitted (the request carries its port). Its
 * streams are accepted and read by the service's own threads as soon as senders connect, framing
 * checked ({@link StreamFraming}), and buffered in memory per (job key, destination) until the
 * engine reads them (or, for a streaming destination, queued chunk by chunk as they arrive). Buffering decouples the job from the engine's scheduling: the job runs to
 * completion while no task slot is held, and a job that fails at any point is discarded whole
 * before the engine sees a row (never a partial answer).
 *
 * <p>Limits: the buffered bytes of all destinations are capped ({@code maxBytes} of
 * {@link #open}); a destination over the cap fails, and with it the job.
 *
 * <p>Keys: the engine names a job's destinations with a key of its own choosing (a UUID), known
 * before the server gives the job an id; {@link #attachJob} adds the server's job id to failures.
 */
public final class ReceiverService {
  /** Names of the service's threads start with this. */
  public static final String THREAD_PREFIX = "jumpgate-";
  /** How often an accept loop looks at whether it should stop. */
  static final int POLL_MS = 200;
  /** A connection that has not sent its 8-byte header within this time is not a stream of ours. */
  static final int HEADER_TIMEOUT_MS = 10000;

  private static final class Holder {
    static final ReceiverService INSTANCE = new ReceiverService();
  }

  private record Id(String key, int index) {}

  private final Map<Id, Destination> destinations = new ConcurrentHashMap<>();
  final AtomicLong buffered = new AtomicLong();
  private final AtomicInteger threadIds = new AtomicInteger();

  /** The service of this JVM (created on first use). */
  public static ReceiverService get() {
    return Holder.INSTANCE;
  }

  /** A separate service (tests). */
  public static ReceiverService create() {
    return new ReceiverService();
  }

  public List<Integer> open(String key, int n, String host, long maxBytes) throws IOException {
    return open(key, n, host, maxBytes, "the receiver's buffer cap");
  }

  /**
   * Opens {@code n} listening sockets for job {@code key} on {@code host}; their ports, in
   * destination order. {@code capName} names the engine setting behind {@code maxBytes} in errors.
   */
  public List<Integer> open(String key, int n, String host, long maxBytes, String capName) throws IOException {
    return open(key, n, host, maxBytes, capName, false);
  }

  /** As above; {@code streaming} destinations hand out chunks as they arrive ({@link Destination}). */
  public List<Integer> open(String key, int n, String host, long maxBytes, String capName, boolean streaming) throws IOException {
    List<Destination> opened = new ArrayList<>();
    try {
      InetAddress addr = InetAddress.getByName(host);
      for (int i = 0; i < n; i++) {
        ServerSocket server = new ServerSocket();
        try {
          server.setReuseAddress(true);
          server.setReceiveBufferSize(4 << 20);
          server.bind(new InetSocketAddress(addr, 0), 64);
        } catch (IOException e) {
          server.close();
          throw e;
        }
        Destination d = new Destination(this, key, i, server, maxBytes, capName, streaming);
        destinations.put(new Id(key, i), d);
        opened.add(d);
        d.startAccepting();
      }
      List<Integer> ports = new ArrayList<>();
      for (Destination d : opened) ports.add(d.port());
      return ports;
    } catch (IOException | RuntimeException | Error e) {
      for (Destination d : opened) remove(key, d.index());
      throw e;
    }
  }

  public Optional<Destination> destination(String key, int i) {
    return Optional.ofNullable(destinations.get(new Id(key, i)));
  }

  /**
   * Tells the destinations of {@code key} how many streams to expect and their tuples' fixed size
   * (known once the job is compiled: {@code expected_streams} and the layout of each output).
   */
  public void expect(String key, List<Integer> expectedStreams, List<Integer> fixedSizes) {
    for (int i = 0; i < expectedStreams.size(); i++) {
      int n = expectedStreams.get(i);
      int fs = fixedSizes.get(i);
      destination(key, i).ifPresent(d -> d.expect(n, fs));
    }
  }

  /** Names the server's job id in the failures of {@code key}'s destinations. */
  public void attachJob(String key, String jobId) {
    for (Destination d : destinationsOf(key)) d.jobId = jobId;
  }

  /** The first failure among the job's destinations. */
  public Optional<String> failure(String key) {
    for (Destination d : destinationsOf(key)) {
      Optional<String> f = d.failure();
      if (f.isPresent()) return f;
    }
    return Optional.empty();
  }

  /** Waits until every destination of the job is complete or one failed; true when all complete. */
  public boolean await(String key, long timeoutMs) throws InterruptedException {
    long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
    for (Destination d : destinationsOf(key)) {
      long left = Math.max(0L, deadline - System.nanoTime());
      if (!d.await(left) || d.failure().isPresent()) return false;
    }
    return true;
  }

  /** The job's destinations, in index order. */
  public List<Destination> destinationsOf(String key) {
    List<Destination> out = new ArrayList<>();
    for (Map.Entry<Id, Destination> e : destinations.entrySet()) if (e.getKey().key().equals(key)) out.add(e.getValue());
    out.sort(Comparator.comparingInt(Destination::index));
    return out;
  }

  /** Drops a job's destinations: closes sockets, stops readers, frees buffers. Idempotent. */
  public void release(String key) {
    for (Destination d : destinationsOf(key)) remove(key, d.index());
  }

  /** Drops one destination once its output was read. */
  public void release(String key, int index) {
    remove(key, index);
  }

  private void remove(String key, int index) {
    Destination d = destinations.remove(new Id(key, index));
    if (d != null) d.close();
  }

  /** Destinations listening or buffered. */
  public int openDestinations() {
    return destinations.size();
  }

  public long bufferedBytes() {
    return buffered.get();
  }

  Thread thread(String name, Runnable body) {
    Thread t = new Thread(body, THREAD_PREFIX + name + "-" + threadIds.incrementAndGet());
    t.setDaemon(true);
    t.start();
    return t;
  }
}
