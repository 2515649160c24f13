package io.jumpgate.core.stats;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicLong;

import io.jumpgate.core.receive.ReceiverService;

/**
 * Process-wide counters of what a Jumpgate client did, for tests and operators: jobs and the rows
 * and bytes they sent back, fallbacks and re-runs with their reasons, and the REST look-ups made
 * while planning. Engine glue adds its own counters (planner time, ...) next to these. The last
 * 100 reasons of each kind are kept.
 */
public final class ClientStats {
  private static final ClientStats GLOBAL = new ClientStats();
  private static final int KEEP = 100;

  private final AtomicLong jobs = new AtomicLong();
  private final AtomicLong rows = new AtomicLong();
  private final AtomicLong bytes = new AtomicLong();
  private final AtomicLong fallbacks = new AtomicLong();
  private final AtomicLong reruns = new AtomicLong();
  private final AtomicLong rereads = new AtomicLong();
  private final AtomicLong capabilityLookups = new AtomicLong();
  private final AtomicLong dataRootLookups = new AtomicLong();
  private final ConcurrentLinkedDeque<String> fallbackReasons = new ConcurrentLinkedDeque<>();
  private final ConcurrentLinkedDeque<String> rerunReasons = new ConcurrentLinkedDeque<>();

  /** The counters of this JVM (of this classloader: each Trino plugin has its own). */
  public static ClientStats get() {
    return GLOBAL;
  }

  /** A job finished and its streams delivered {@code rows} tuples in {@code bytes} bytes. */
  public void job(long rowCount, long byteCount) {
    jobs.incrementAndGet();
    rows.addAndGet(rowCount);
    bytes.addAndGet(byteCount);
  }

  /** Work the engine ran itself instead of Jumpgate, and why. */
  public void fallback(String reason) {
    fallbacks.incrementAndGet();
    keep(fallbackReasons, reason);
  }

  /** A job run again because its output was read after its buffers were gone. */
  public void rerun(String reason) {
    reruns.incrementAndGet();
    keep(rerunReasons, reason);
  }

  /** Output read again from its buffer. */
  public void reread() {
    rereads.incrementAndGet();
  }

  public void capabilityLookup() {
    capabilityLookups.incrementAndGet();
  }

  public void dataRootLookup() {
    dataRootLookups.incrementAndGet();
  }

  private static void keep(ConcurrentLinkedDeque<String> q, String s) {
    q.addLast(s);
    while (q.size() > KEEP) q.pollFirst();
  }

  public long jobs() {
    return jobs.get();
  }

  public long rowsReceived() {
    return rows.get();
  }

  public long bytesReceived() {
    return bytes.get();
  }

  public long fallbacks() {
    return fallbacks.get();
  }

  public long reruns() {
    return reruns.get();
  }

  public long rereads() {
    return rereads.get();
  }

  /** GET /v1/ncas requests made (the capability cache missed). */
  public long capabilityLookups() {
    return capabilityLookups.get();
  }

  /** Requests that asked a server for its data root. */
  public long dataRootLookups() {
    return dataRootLookups.get();
  }

  public List<String> fallbackReasons() {
    return new ArrayList<>(fallbackReasons);
  }

  public List<String> rerunReasons() {
    return new ArrayList<>(rerunReasons);
  }

  /** Destinations still buffered or listening (0 when nothing leaked). */
  public int openDestinations() {
    return ReceiverService.get().openDestinations();
  }

  public long bufferedBytes() {
    return ReceiverService.get().bufferedBytes();
  }

  /** Live threads of the receiver service ("jumpgate-..."). */
  public int receiverThreads() {
    int n = 0;
    for (Thread t : Thread.getAllStackTraces().keySet()) if (t.getName().startsWith(ReceiverService.THREAD_PREFIX)) n++;
    return n;
  }

  /** Zero the counters (the reasons are kept). */
  public void reset() {
    for (AtomicLong c : List.of(jobs, rows, bytes, fallbacks, reruns, rereads, capabilityLookups, dataRootLookups)) c.set(0);
  }
}
