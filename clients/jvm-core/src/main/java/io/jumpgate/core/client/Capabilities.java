package io.jumpgate.core.client;

import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

import io.jumpgate.core.stats.ClientStats;

/**
 * What the server's NCAs can run (GET /v1/ncas: the operation kinds), or why that is unknown.
 * {@link #of} caches per server for a few seconds, so planning a batch of queries asks once.
 */
public final class Capabilities {
  private static final long TTL_MS = 5000L;
  private static final Map<String, Cached> CACHE = new ConcurrentHashMap<>();

  private record Cached(long at, Capabilities caps) {}

  /** Every operation of the contract (planning without asking the server). */
  public static final Capabilities ASSUME_ALL =
      new Capabilities(Set.of("read", "filter", "project", "join", "aggregate", "shuffle", "send"), null);

  private final Set<String> operations;
  private final String unreachable;

  public Capabilities(Set<String> operations, String unreachable) {
    this.operations = Set.copyOf(operations);
    this.unreachable = unreachable;
  }

  /** The server's capabilities, from the cache when fresh; an unreachable server is remembered too. */
  public static Capabilities of(JumpgateClient client) {
    long now = System.currentTimeMillis();
    Cached hit = CACHE.get(client.url());
    if (hit != null && now - hit.at() < TTL_MS) return hit.caps();
    ClientStats.get().capabilityLookup();
    Capabilities caps;
    try {
      caps = new Capabilities(client.operations(), null);
    } catch (Exception e) {
      caps = new Capabilities(Set.of(), "Jumpgate server unreachable: " + e.getMessage());
    }
    CACHE.put(client.url(), new Cached(now, caps));
    return caps;
  }

  /** Forget every server's capabilities (tests, or after NCAs were registered). */
  public static void invalidate() {
    CACHE.clear();
  }

  public Set<String> operations() {
    return operations;
  }

  public boolean has(String kind) {
    return unreachable == null && operations.contains(kind);
  }

  /** Why the server was not asked successfully, if it was not. */
  public Optional<String> unreachable() {
    return Optional.ofNullable(unreachable);
  }

  /** Why operation {@code kind} cannot run on the server; empty when it can. */
  public Optional<String> missing(String kind) {
    if (unreachable != null) return Optional.of(unreachable);
    if (operations.contains(kind)) return Optional.empty();
    return Optional.of("no NCA on the server runs '" + kind + "' (GET /v1/ncas lists "
        + String.join(", ", new TreeSet<>(operations)) + ")");
  }
}
