package io.jumpgate.core.client;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.jumpgate.core.request.Request;
import io.jumpgate.core.stats.ClientStats;

/**
 * A small client of the REST API (contract section 4) on the JDK's HTTP client. Thread-safe; one
 * per (server, timeout, token) is shared through {@link #shared}. {@code token}: the bearer token of
 * a server with tenants (docs/security.md), or null.
 *
 * <p>Errors: {@link ServerUnreachable} when the server cannot be reached, {@link RequestRejected}
 * when it answers with an error status; both are IOExceptions. An interrupt while waiting for an
 * answer is an InterruptedIOException (the thread's interrupt flag is set again).
 */
public final class JumpgateClient {
  /** Jackson's mapper, shared (thread-safe once configured). */
  public static final ObjectMapper MAPPER = new ObjectMapper();

  private static final Map<List<Object>, JumpgateClient> SHARED = new ConcurrentHashMap<>();
  private static final long RETRY_LOOKUP_MS = 5000L;
  private static final Map<String, DataRoot> DATA_ROOTS = new ConcurrentHashMap<>();
  private static final Map<String, Failure> DATA_ROOT_FAILURES = new ConcurrentHashMap<>();

  private record Failure(long at, String why) {}

  private static final class Http {
    static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5))
        .version(HttpClient.Version.HTTP_1_1).build();
  }

  private final String url;
  private final long timeoutMs;
  private final String token;

  public JumpgateClient(String url, long timeoutMs, String token) {
    this.url = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
    this.timeoutMs = timeoutMs;
    this.token = token;
  }

  /** The client of this server, timeout and token, made once per JVM. */
  public static JumpgateClient shared(String url, long timeoutMs, String token) {
    return SHARED.computeIfAbsent(java.util.Arrays.asList(url, timeoutMs, token),
        k -> new JumpgateClient(url, timeoutMs, token));
  }

  public String url() {
    return url;
  }

  public long timeoutMs() {
    return timeoutMs;
  }

  /** One call; the answer's JSON (an empty object for an empty body). */
  public JsonNode call(String method, String path, String body) throws IOException {
    return call(method, path, body, timeoutMs);
  }

  private JsonNode call(String method, String path, String body, long timeout) throws IOException {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url + path)).timeout(Duration.ofMillis(timeout))
        .header("Content-Type", "application/json");
    if (token != null) b.header("Authorization", "Bearer " + token);
    b.method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
    HttpResponse<String> resp;
    try {
      resp = Http.CLIENT.send(b.build(), HttpResponse.BodyHandlers.ofString());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException(method + " " + path + ": interrupted");
    } catch (IOException e) {
      throw new ServerUnreachable(method + " " + path + ": cannot reach the Jumpgate server at " + url + ": " + e, e);
    }
    String text = Objects.requireNonNullElse(resp.body(), "");
    JsonNode json;
    try {
      json = text.isEmpty() ? MAPPER.createObjectNode() : MAPPER.readTree(text);
    } catch (IOException e) {
      json = MAPPER.createObjectNode().put("message", head(text));
    }
    if (resp.statusCode() >= 400) {
      JsonNode err = json.has("error") && json.get("error").isObject() ? json.get("error") : json;
      String msg = err.hasNonNull("message") ? err.get("message").asText() : head(text);
      throw new RequestRejected(resp.statusCode(), msg, textOrNull(err, "operation"), textOrNull(err, "path"), text);
    }
    return json;
  }

  private static String head(String text) {
    return text.length() <= 500 ? text : text.substring(0, 500);
  }

  private static String textOrNull(JsonNode j, String key) {
    JsonNode v = j.get(key);
    return v != null && v.isTextual() ? v.asText() : null;
  }

  /** POST /v1/jobs: compile a request (validate, map to NCAs, compute NTFs). */
  public CompiledJob submit(Request request) throws IOException {
    return submit(request.toJson());
  }

  public CompiledJob submit(String requestJson) throws IOException {
    return compiled(call("POST", "/v1/jobs", requestJson));
  }

  /**
   * POST /v1/jobs?execute=true: compile and run in one call, a round trip sooner than {@link
   * #execute}; the client must already listen at every send address, and accept streams before it
   * has read the answer's layouts. A server without this addition leaves the job compiled ({@link
   * CompiledJob#started()} false): the caller then executes it as usual.
   */
  public CompiledJob submitAndExecute(Request request) throws IOException {
    return compiled(call("POST", "/v1/jobs?execute=true", request.toJson()));
  }

  private static CompiledJob compiled(JsonNode a) throws IOException {
    Map<String, OutputInfo> outs = new LinkedHashMap<>();
    JsonNode o = a.path("outputs");
    for (var it = o.fields(); it.hasNext(); ) {
      var e = it.next();
      JsonNode v = e.getValue();
      outs.put(e.getKey(), new OutputInfo(e.getKey(), MAPPER.writeValueAsString(v.get("layout")),
          v.path("expected_streams").asInt(1)));
    }
    if (!a.hasNonNull("job_id")) throw new IOException("POST /v1/jobs answered without a job_id: " + head(a.toString()));
    return new CompiledJob(a.get("job_id").asText(), outs, a);
  }

  /**
   * Compiles a request and cancels it at once: nothing runs. Returns normally when the server
   * accepts the request; RequestRejected says why not (its {@code operation()} names the culprit).
   */
  public void dryRun(Request request) throws IOException {
    dryRun(request.toJson());
  }

  public void dryRun(String requestJson) throws IOException {
    CompiledJob job = submit(requestJson);
    cancelQuietly(job.jobId());
  }

  /** POST /v1/jobs/{id}/execute: the client must already listen at every send address. */
  public void execute(String jobId) throws IOException {
    call("POST", "/v1/jobs/" + jobId + "/execute", null);
  }

  public JobStatus status(String jobId) throws IOException {
    return status(jobId, 0);
  }

  /** GET /v1/jobs/{id}, long-polling up to {@code waitS} seconds for a change of state. */
  public JobStatus status(String jobId, double waitS) throws IOException {
    String path = waitS > 0 ? String.format(Locale.ROOT, "/v1/jobs/%s?wait=%.3f", jobId, waitS) : "/v1/jobs/" + jobId;
    JsonNode a = call("GET", path, null, timeoutMs + (long) (waitS * 1000));
    JsonNode e = a.get("error");
    String err = e == null || e.isNull() ? null : e.hasNonNull("message") ? e.get("message").asText() : e.toString();
    return new JobStatus(jobId, a.path("state").asText(), err);
  }

  /** Long-polls the job until it ends or {@code timeoutMs} passes; its last status either way. */
  public JobStatus waitFor(String jobId, long timeoutMs, double pollS) throws IOException {
    long deadline = System.currentTimeMillis() + timeoutMs;
    JobStatus st = status(jobId, pollS);
    while (!st.terminal() && System.currentTimeMillis() < deadline) st = status(jobId, pollS);
    return st;
  }

  /** DELETE /v1/jobs/{id}: cancel and clean up. */
  public void cancel(String jobId) throws IOException {
    call("DELETE", "/v1/jobs/" + jobId, null);
  }

  /** Cancel, ignoring any error (cleanup paths: the job may be gone already). */
  public void cancelQuietly(String jobId) {
    try {
      cancel(jobId);
    } catch (IOException | RuntimeException e) {
      // best effort
    }
  }

  /** GET /v1/nodes: the server's nodes (state, cores in use, data_root, ...), as the server lists them. */
  public List<JsonNode> nodes() throws IOException {
    List<JsonNode> out = new ArrayList<>();
    call("GET", "/v1/nodes", null).forEach(out::add);
    return out;
  }

  /**
   * The directory the server's nodes resolve a read's relative paths in, as the server tells its
   * clients: the {@code data_root} GET /v1/nodes gives each node, when all nodes have the same one
   * (an authenticated call: GET /v1/health does not say it). Unknown, with why, when they differ.
   */
  public DataRoot dataRoot() throws IOException {
    Set<String> roots = new LinkedHashSet<>();
    boolean missing = false;
    List<JsonNode> nodes = nodes();
    for (JsonNode n : nodes) {
      JsonNode r = n.get("data_root");
      if (r != null && r.isTextual()) roots.add(r.asText());
      else missing = true;
    }
    if (nodes.isEmpty()) return DataRoot.unknown("the server at " + url + " lists no nodes");
    if (roots.size() == 1 && !missing) return DataRoot.of(roots.iterator().next());
    if (missing) roots.add("?");
    return DataRoot.unknown("the server at " + url + " has nodes with different data roots (GET /v1/nodes: "
        + String.join(", ", roots) + ")");
  }

  /**
   * The data root of the server at {@code url} ({@link #dataRoot}), asked once per server and kept
   * for the life of the JVM. A server that cannot be reached is asked again after a few seconds,
   * not on every plan.
   */
  public static DataRoot serverDataRoot(String url, long timeoutMs, String token) {
    DataRoot known = DATA_ROOTS.get(url);
    if (known != null) return known;
    long now = System.currentTimeMillis();
    Failure failed = DATA_ROOT_FAILURES.get(url);
    if (failed != null && now - failed.at() < RETRY_LOOKUP_MS) return DataRoot.unknown(failed.why());
    ClientStats.get().dataRootLookup();
    try {
      DataRoot answer = shared(url, timeoutMs, token).dataRoot();
      DATA_ROOTS.put(url, answer);
      DATA_ROOT_FAILURES.remove(url);
      return answer;
    } catch (IOException | RuntimeException e) {
      String why = "cannot ask the server at " + url + ": " + e.getMessage();
      DATA_ROOT_FAILURES.put(url, new Failure(now, why));
      return DataRoot.unknown(why);
    }
  }

  /** Forget the servers' data roots (tests). */
  public static void forgetDataRoots() {
    DATA_ROOTS.clear();
    DATA_ROOT_FAILURES.clear();
  }

  /** GET /v1/ncas: the operation kinds some registered NCA can run. */
  public Set<String> operations() throws IOException {
    Set<String> ops = new HashSet<>();
    for (JsonNode n : call("GET", "/v1/ncas", null)) for (JsonNode op : n.path("operations")) ops.add(op.asText());
    return ops;
  }

  /** {@link Capabilities#of}(this): cached for a few seconds. */
  public Capabilities capabilities() {
    return Capabilities.of(this);
  }

  /** A call that may throw IOException. */
  @FunctionalInterface
  public interface IoCall<T> {
    T call() throws IOException;
  }

  /**
   * Runs {@code call}, retrying a 503 (no free NCA resources: other jobs are running), as the
   * contract asks, with a growing pause (20 ms doubling to 500 ms) until {@code timeoutMs}.
   */
  public static <T> T retryOn503(long timeoutMs, IoCall<T> call) throws IOException {
    long deadline = System.currentTimeMillis() + timeoutMs;
    long pause = 20;
    while (true) {
      try {
        return call.call();
      } catch (RequestRejected r) {
        if (r.status() != 503 || System.currentTimeMillis() + pause >= deadline) throw r;
      }
      try {
        Thread.sleep(pause);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new InterruptedIOException("interrupted while retrying a 503");
      }
      pause = Math.min(500L, pause * 2);
    }
  }
}
