package io.jumpgate.core.run;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpServer;

import io.jumpgate.core.client.JumpgateClient;
import io.jumpgate.core.client.OutputInfo;
import io.jumpgate.core.ntf.NtfWriter;
import io.jumpgate.core.receive.ReceiverService;
import io.jumpgate.core.receive.StreamData;
import io.jumpgate.core.request.Ops;
import io.jumpgate.core.request.Request;

/** A whole job against a stub server whose "NCA" sends streams to the ports in the request. */
class JobRunnerTest {
  static final String LAYOUT = "{\"version\": 1, \"null_bytes\": 8, \"fixed_size\": 16, \"variable\": false, \"fields\": "
      + "[{\"name\": \"c0\", \"type\": \"int64\", \"offset\": 8, \"size\": 8, \"null_bit\": 0}]}";

  private HttpServer server;
  private String url;
  private final AtomicReference<String> state = new AtomicReference<>("succeeded");
  private final AtomicReference<byte[]> streamBytes = new AtomicReference<>();
  private final List<String> calls = new CopyOnWriteArrayList<>();
  private volatile List<Integer> ports = List.of();
  /** Whether the stub honours POST /v1/jobs?execute=true (else it ignores it, as an older server). */
  private volatile boolean oneCall = false;

  @BeforeEach
  void start() throws IOException {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext("/", ex -> {
      String call = ex.getRequestMethod() + " " + ex.getRequestURI().getPath();
      calls.add(call);
      String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
      String answer;
      int status = 200;
      if (call.equals("POST /v1/jobs")) {
        JsonNode req = JumpgateClient.MAPPER.readTree(body);
        List<Integer> ps = new ArrayList<>();
        for (JsonNode op : req.get("operations")) if (op.get("kind").asText().equals("send")) ps.add(op.get("port").asInt());
        ports = ps;
        boolean start = oneCall && "execute=true".equals(ex.getRequestURI().getQuery());
        if (start) sendStreams(); // before the answer: the client has not read the layouts yet
        answer = "{\"job_id\": \"j7\", \"state\": \"" + (start ? "running" : "compiled") + "\", \"outputs\": "
            + "{\"out_g0\": {\"layout\": " + LAYOUT + ", \"expected_streams\": 1}}}";
        status = 201;
      } else if (call.equals("POST /v1/jobs/j7/execute")) {
        sendStreams();
        answer = "{\"job_id\": \"j7\", \"state\": \"running\"}";
        status = 202;
      } else if (call.equals("GET /v1/jobs/j7")) {
        String st = state.get();
        answer = "{\"job_id\": \"j7\", \"state\": \"" + st + "\", \"error\": "
            + (st.equals("failed") ? "{\"message\": \"nca 1 died\"}" : "null") + "}";
      } else {
        answer = "{\"job_id\": \"j7\", \"state\": \"cancelled\"}";
      }
      byte[] out = answer.getBytes(StandardCharsets.UTF_8);
      ex.sendResponseHeaders(status, out.length);
      ex.getResponseBody().write(out);
      ex.close();
    });
    server.start();
    url = "http://127.0.0.1:" + server.getAddress().getPort();
  }

  private void sendStreams() throws IOException {
    for (int p : ports) {
      try (Socket s = new Socket("127.0.0.1", p)) {
        OutputStream out = s.getOutputStream();
        out.write(streamBytes.get());
      }
    }
  }

  @AfterEach
  void stop() {
    server.stop(0);
  }

  static byte[] tuple(long v) {
    return new NtfWriter(io.jumpgate.core.ntf.NtfLayout.fromJson(LAYOUT)).setLong(0, v).finish();
  }

  List<OutputInfo> run(ReceiverService svc, String key) throws IOException {
    JobRunner.Settings s = new JobRunner.Settings("127.0.0.1", 1 << 20, "cap", 5000, "timeout");
    return JobRunner.run(new JumpgateClient(url, 5000, null), svc, key, 1, s,
        addrs -> new Request("t", List.of(Ops.send("out_g0", "x", addrs.get(0).host(), addrs.get(0).port()))),
        k -> "out_g" + k, layouts -> assertEquals(16, layouts.get(0).fixedSize()));
  }

  @Test
  void aJobDeliversItsStreams() throws IOException {
    streamBytes.set(NtfWriter.stream(0, tuple(1), tuple(2)));
    ReceiverService svc = ReceiverService.create();
    List<OutputInfo> outs = run(svc, "r1");
    assertEquals(1, outs.size());
    List<StreamData> data = svc.destination("r1", 0).orElseThrow().data();
    assertEquals(2, data.get(0).tuples());
    svc.release("r1");
  }

  @Test
  void aServerThatStartsTheJobOnSubmitIsCalledOnce() throws IOException {
    oneCall = true;
    streamBytes.set(NtfWriter.stream(0, tuple(1), tuple(2), tuple(3)));
    ReceiverService svc = ReceiverService.create();
    run(svc, "r4");
    assertEquals(3, svc.destination("r4", 0).orElseThrow().data().get(0).tuples());
    assertTrue(calls.contains("POST /v1/jobs") && !calls.contains("POST /v1/jobs/j7/execute"), calls.toString());
    svc.release("r4");
  }

  @Test
  void aServerThatOnlyCompilesIsAskedToExecute() throws IOException {
    streamBytes.set(NtfWriter.stream(0, tuple(1)));
    ReceiverService svc = ReceiverService.create();
    run(svc, "r5");
    assertTrue(calls.contains("POST /v1/jobs/j7/execute"), calls.toString());
    svc.release("r5");
  }

  @Test
  void aFailedJobIsCancelledAndReleased() {
    streamBytes.set(NtfWriter.stream(0, tuple(1)));
    state.set("failed");
    ReceiverService svc = ReceiverService.create();
    JobFailedException e = assertThrows(JobFailedException.class, () -> run(svc, "r2"));
    assertEquals("job j7 failed: nca 1 died", e.getMessage());
    assertEquals(0, svc.openDestinations());
    assertTrue(calls.contains("DELETE /v1/jobs/j7"), calls.toString());
  }

  @Test
  void aBrokenStreamFailsTheJob() {
    byte[] s = NtfWriter.stream(0, tuple(1), tuple(2));
    streamBytes.set(java.util.Arrays.copyOf(s, s.length - 5));
    state.set("running");
    ReceiverService svc = ReceiverService.create();
    io.jumpgate.core.Log.setSink(new io.jumpgate.core.Log.Sink() {
      public void warn(String m) {}
      public void debug(String m) {}
      public boolean debugEnabled() { return false; }
    });
    try {
      JobFailedException e = assertThrows(JobFailedException.class, () -> run(svc, "r3"));
      assertTrue(e.getMessage().contains("job j7: destination r3[0] (job j7): stream from"), e.getMessage());
      assertTrue(e.getMessage().contains("ended before its end marker after 2 tuples"), e.getMessage());
      assertEquals(0, svc.openDestinations());
    } finally {
      io.jumpgate.core.Log.setSink(null);
    }
  }
}
