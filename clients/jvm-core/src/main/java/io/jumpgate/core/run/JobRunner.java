package io.jumpgate.core.run;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.function.IntFunction;

import io.jumpgate.core.Log;
import io.jumpgate.core.client.CompiledJob;
import io.jumpgate.core.client.JobStatus;
import io.jumpgate.core.client.JumpgateClient;
import io.jumpgate.core.client.OutputInfo;
import io.jumpgate.core.ntf.NtfLayout;
import io.jumpgate.core.receive.ReceiverService;
import io.jumpgate.core.request.Request;

/**
 * Runs one job whose {@code n} sends land in destinations 0..n-1 of {@code key} in this JVM's
 * receiver service, and returns once every stream has ended with a correct count:
 *
 * <ol>
 *   <li>open one listening socket per destination;</li>
 *   <li>POST /v1/jobs?execute=true with the request for those ports (a 503 is retried): the job
 *       compiles and starts in one call (the destinations listen already, and hold a stream that
 *       comes before its layout until {@code expect}); hand the output layouts to the engine's
 *       {@code check} (type checks, decoder generation);</li>
 *   <li>tell the destinations how many streams to expect; POST execute only when the server did
 *       not start the job (one that ignores {@code execute=true} answers "compiled");</li>
 *   <li>long-poll the job until it ends, watching the destinations for broken streams; wait for the
 *       streams to end.</li>
 * </ol>
 *
 * The destinations stay buffered for the engine to read and release. Any failure cancels the job
 * (DELETE), releases the destinations and raises: the engine then runs the work itself. The engine
 * keeps what is its own: when to release buffers, metrics, how to fall back.
 */
public final class JobRunner {
  /** Where to listen and how long to wait. */
  public record Settings(String host, long maxBufferBytes, String maxBufferSetting, long jobTimeoutMs,
                         String jobTimeoutSetting, long streamGraceMs, double pollS) {
    /** Defaults: 30 s for streams to end after the job succeeded, 0.25 s long polls. */
    public Settings(String host, long maxBufferBytes, String maxBufferSetting, long jobTimeoutMs, String jobTimeoutSetting) {
      this(host, maxBufferBytes, maxBufferSetting, jobTimeoutMs, jobTimeoutSetting, 30_000L, 0.25);
    }
  }

  /** One send's address. */
  public record Address(String host, int port) {}

  private JobRunner() {}

  /**
   * @param request  the request for the destinations' addresses (send k to {@code addresses.get(k)})
   * @param sendName the name of the send feeding destination k (e.g. {@code k -> "out_g" + k})
   * @param check    the engine's look at the output layouts (in destination order) before anything
   *                 runs; what it throws fails the job
   * @return the outputs, in destination order
   */
  public static List<OutputInfo> run(JumpgateClient client, ReceiverService service, String key, int n, Settings s,
                                     java.util.function.Function<List<Address>, Request> request,
                                     IntFunction<String> sendName, Consumer<List<NtfLayout>> check) throws IOException {
    CompiledJob job = null;
    try {
      List<Integer> ports = service.open(key, n, s.host(), s.maxBufferBytes(), s.maxBufferSetting());
      Log.debug(() -> "Jumpgate: job " + key + " receives on " + s.host() + " port(s) " + ports);
      List<Address> addresses = new ArrayList<>();
      for (int p : ports) addresses.add(new Address(s.host(), p));
      Request req = request.apply(addresses);
      CompiledJob compiled = JumpgateClient.retryOn503(s.jobTimeoutMs(), () -> client.submitAndExecute(req));
      job = compiled;
      service.attachJob(key, compiled.jobId());
      List<OutputInfo> outputs = new ArrayList<>();
      List<NtfLayout> layouts = new ArrayList<>();
      List<Integer> expected = new ArrayList<>();
      List<Integer> fixed = new ArrayList<>();
      for (int k = 0; k < n; k++) {
        String name = sendName.apply(k);
        OutputInfo o = compiled.output(name)
            .orElseThrow(() -> new JobFailedException("job " + compiled.jobId() + ": the server's answer has no output " + name));
        NtfLayout l;
        try {
          l = o.layout();
        } catch (IllegalArgumentException e) {
          throw new JobFailedException("job " + compiled.jobId() + ": unreadable NTF layout of " + name + ": " + e.getMessage());
        }
        outputs.add(o);
        layouts.add(l);
        expected.add(o.expectedStreams());
        fixed.add(l.fixedSize());
      }
      check.accept(layouts);
      service.expect(key, expected, fixed);
      if (!compiled.started()) {
        JumpgateClient.retryOn503(s.jobTimeoutMs(), () -> {
          client.execute(compiled.jobId());
          return null;
        });
      }
      awaitJob(client, compiled.jobId(), service, key, s);
      if (!service.await(key, s.streamGraceMs()))
        throw new JobFailedException(service.failure(key).orElse("job " + compiled.jobId()
            + " succeeded but its streams did not end within " + s.streamGraceMs() / 1000 + " s"));
      return outputs;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      cleanUp(client, service, key, job, e);
      throw new java.io.InterruptedIOException("interrupted while running job " + key);
    } catch (Throwable e) { // anything, also what an engine's callback throws past Java's checks
      cleanUp(client, service, key, job, e);
      throw e;
    }
  }

  private static void cleanUp(JumpgateClient client, ReceiverService service, String key, CompiledJob job, Throwable e) {
    List<Integer> ports = new ArrayList<>();
    service.destinationsOf(key).forEach(d -> ports.add(d.port()));
    if (job != null) client.cancelQuietly(job.jobId());
    service.release(key);
    String id = job == null ? "(not submitted)" : job.jobId();
    Log.debug(() -> "Jumpgate: job " + id + " failed; its destinations were port(s) " + ports + ": " + e);
  }

  /** Long-polls until the job succeeded; a failed or cancelled job, a broken stream or the timeout raise. */
  private static void awaitJob(JumpgateClient client, String jobId, ReceiverService service, String key, Settings s)
      throws IOException {
    long deadline = System.currentTimeMillis() + s.jobTimeoutMs();
    while (true) {
      JobStatus st = client.status(jobId, s.pollS());
      if (st.succeeded()) return;
      if (st.failed() || st.cancelled())
        throw new JobFailedException("job " + jobId + " " + st.state() + ": " + st.errorMessage().orElse("no reason given"));
      Optional<String> broken = service.failure(key);
      if (broken.isPresent()) {
        // A broken stream usually follows a failing NCA: give the server a moment to say why.
        long settle = System.currentTimeMillis() + 3000;
        JobStatus last = st;
        while (!last.terminal() && System.currentTimeMillis() < settle) last = client.status(jobId, s.pollS());
        throw new JobFailedException("job " + jobId + ": " + last.errorMessage().orElse(broken.get()));
      }
      if (System.currentTimeMillis() > deadline)
        throw new JobFailedException("job " + jobId + " did not finish within " + s.jobTimeoutMs() / 1000 + " s ("
            + s.jobTimeoutSetting() + ")");
    }
  }
}
