package io.jumpgate.core.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import com.sun.net.httpserver.HttpServer;

import io.jumpgate.core.request.ContractType;

/** The REST client against a stub server answering as contract section 4 says. */
class JumpgateClientTest {
  private HttpServer server;
  private String url;
  private final Map<String, String[]> answers = new ConcurrentHashMap<>(); // "METHOD path" -> {status, body}
  private final List<String> seen = new ArrayList<>();
  private final AtomicInteger busy = new AtomicInteger();

  @BeforeEach
  void start() throws IOException {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext("/", ex -> {
      String key = ex.getRequestMethod() + " " + ex.getRequestURI();
      String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
      synchronized (seen) {
        seen.add(key + " " + body + " " + ex.getRequestHeaders().getFirst("Authorization"));
      }
      String[] a = answers.getOrDefault(key, new String[] {"404", "{\"error\": {\"message\": \"no such path\"}}"});
      if (key.equals("POST /v1/jobs") && busy.getAndDecrement() > 0) a = new String[] {"503", "{\"error\": {\"message\": \"busy\"}}"};
      byte[] out = a[1].getBytes(StandardCharsets.UTF_8);
      ex.sendResponseHeaders(Integer.parseInt(a[0]), out.length == 0 ? -1 : out.length);
      if (out.length > 0) ex.getResponseBody().write(out);
      ex.close();
    });
    server.start();
    url = "http://127.0.0.1:" + server.getAddress().getPort();
    answers.put("POST /v1/jobs", new String[] {"201", "{\"job_id\": \"j1\", \"state\": \"compiled\", \"outputs\": {\"out\": "
        + "{\"layout\": {\"version\": 1, \"null_bytes\": 8, \"fixed_size\": 16, \"variable\": false, \"fields\": "
        + "[{\"name\": \"c0\", \"type\": \"int64\", \"offset\": 8, \"size\": 8, \"null_bit\": 0}]}, \"expected_streams\": 3}}}"});
  }

  @AfterEach
  void stop() {
    server.stop(0);
  }

  @Test
  void submitParsesOutputs() throws IOException {
    JumpgateClient c = new JumpgateClient(url, 5000, "secret");
    CompiledJob job = c.submit("{\"operations\": []}");
    assertEquals("j1", job.jobId());
    OutputInfo o = job.output("out").orElseThrow();
    assertEquals(3, o.expectedStreams());
    assertEquals(ContractType.INT64, o.layout().field(0).type());
    assertEquals(16, o.layout().fixedSize());
    assertTrue(seen.get(0).endsWith("Bearer secret"), seen.get(0));
  }

  @Test
  void submitAndExecuteSaysWhetherTheServerStartedTheJob() throws IOException {
    JumpgateClient c = new JumpgateClient(url, 5000, null);
    io.jumpgate.core.request.Request r = new io.jumpgate.core.request.Request("t", List.of());
    // A server without the one-call addition ignores the parameter: the job stays compiled.
    answers.put("POST /v1/jobs?execute=true", answers.get("POST /v1/jobs"));
    assertFalse(c.submitAndExecute(r).started());
    answers.put("POST /v1/jobs?execute=true", new String[] {"201", answers.get("POST /v1/jobs")[1]
        .replace("\"compiled\"", "\"running\"")});
    CompiledJob job = c.submitAndExecute(r);
    assertTrue(job.started());
    assertEquals(3, job.output("out").orElseThrow().expectedStreams());
    assertTrue(seen.get(1).startsWith("POST /v1/jobs?execute=true "), seen.get(1));
  }

  @Test
  void errorsCarryStatusMessageAndOperation() {
    answers.put("POST /v1/jobs", new String[] {"422", "{\"error\": {\"message\": \"bad condition\", "
        + "\"path\": \"operations[1].condition\", \"operation\": \"f_g0\"}}"});
    RequestRejected r = assertThrows(RequestRejected.class, () -> new JumpgateClient(url, 5000, null).submit("{}"));
    assertEquals(422, r.status());
    assertEquals("bad condition", r.serverMessage());
    assertEquals("f_g0", r.operation().orElseThrow());
    assertEquals("operations[1].condition", r.path().orElseThrow());
    assertEquals("HTTP 422: bad condition", r.getMessage());
  }

  @Test
  void unreachable() {
    server.stop(0);
    assertThrows(ServerUnreachable.class, () -> new JumpgateClient(url, 2000, null).operations());
  }

  @Test
  void retriesA503() throws IOException {
    busy.set(2);
    JumpgateClient c = new JumpgateClient(url, 5000, null);
    assertEquals("j1", JumpgateClient.retryOn503(5000, () -> c.submit("{}")).jobId());
    busy.set(100);
    RequestRejected r = assertThrows(RequestRejected.class, () -> JumpgateClient.retryOn503(100, () -> c.submit("{}")));
    assertEquals(503, r.status());
  }

  @Test
  void statusWaitAndCancel() throws IOException {
    answers.put("GET /v1/jobs/j1?wait=0.250", new String[] {"200",
        "{\"job_id\": \"j1\", \"state\": \"failed\", \"error\": {\"message\": \"nca 2 died\"}}"});
    answers.put("DELETE /v1/jobs/j1", new String[] {"200", "{\"job_id\": \"j1\", \"state\": \"cancelled\"}"});
    JumpgateClient c = new JumpgateClient(url, 5000, null);
    JobStatus st = c.waitFor("j1", 1000, 0.25);
    assertTrue(st.terminal() && st.failed());
    assertEquals("nca 2 died", st.errorMessage().orElseThrow());
    c.cancel("j1");
    c.cancelQuietly("nope");
  }

  @Test
  void dataRootAndCapabilities() throws IOException {
    answers.put("GET /v1/nodes", new String[] {"200", "[{\"name\": \"a\", \"data_root\": \"/d\"}, {\"name\": \"b\", \"data_root\": \"/d\"}]"});
    answers.put("GET /v1/ncas", new String[] {"200", "[{\"operations\": [\"read\", \"filter\"]}, {\"operations\": [\"send\"]}]"});
    JumpgateClient c = new JumpgateClient(url, 5000, null);
    assertEquals("/d", c.dataRoot().root());
    answers.put("GET /v1/nodes", new String[] {"200", "[{\"data_root\": \"/d\"}, {\"data_root\": \"/e\"}]"});
    DataRoot differ = c.dataRoot();
    assertFalse(differ.known());
    assertTrue(differ.why().contains("different data roots (GET /v1/nodes: /d, /e)"), differ.why());
    Capabilities.invalidate();
    Capabilities caps = c.capabilities();
    assertTrue(caps.has("filter"));
    assertTrue(caps.missing("join").orElseThrow().contains("no NCA on the server runs 'join' (GET /v1/ncas lists filter, read, send)"));
  }
}
