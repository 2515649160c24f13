package io.jumpgate.trino;

import io.jumpgate.core.client.CompiledJob;
import io.jumpgate.core.client.JobStatus;
import io.jumpgate.core.client.JumpgateClient;
import io.jumpgate.core.client.OutputInfo;
import io.jumpgate.core.client.RequestRejected;
import io.jumpgate.core.client.ServerUnreachable;
import io.jumpgate.core.ntf.NtfLayout;
import io.jumpgate.core.receive.Destination;
import io.jumpgate.core.receive.ReceiverService;
import io.jumpgate.core.request.JsonObject;
import io.jumpgate.core.request.Op;
import io.jumpgate.core.request.Ops;
import io.jumpgate.core.request.Request;
import io.trino.spi.TrinoException;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The Jumpgate jobs of this JVM's running scans. The first page source of a scan starts its job
 * (it alone knows which columns the query reads): open one listening destination per split in
 * the receiver service, POST the request with {@code execute=true} (compile and run in one call),
 * and watch the job on a thread of its own until it ends. Each page source reads its destination
 * and releases it on close; a reaper drops what a query left (splits never read after a LIMIT was
 * satisfied, a cancelled query).
 */
public final class JobRuns implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(JobRuns.class.getName());
    private static final double POLL_S = 0.25;
    private static final long SETTLE_MS = 3000;
    private static final long IDLE_MS = 60_000;
    static final long MAX_BUFFER_BYTES = 2L << 30;

    private final JumpgateConfig config;
    private final String advertisedHost;
    private final JumpgateClient client;
    private final ReceiverService service = ReceiverService.get();
    private final Map<String, Run> runs = new ConcurrentHashMap<>();
    /** Runs dropped before all their splits were read, and why: a late split must not start the job again. */
    private final Map<String, String> dropped = new ConcurrentHashMap<>();
    private final ScheduledExecutorService reaper;

    /**
     * @param advertisedHost the host the job's NCAs connect to: the listen address, or this
     *                       node's address when it listens on every interface (0.0.0.0, ::)
     */
    public JobRuns(JumpgateConfig config, String advertisedHost) {
        this.config = config;
        this.advertisedHost = advertisedHost;
        this.client = new JumpgateClient(config.url(), config.httpTimeoutMs(), config.token());
        this.reaper = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "jumpgate-trino-reaper");
            t.setDaemon(true);
            return t;
        });
        reaper.scheduleWithFixedDelay(this::reap, 10, 10, TimeUnit.SECONDS);
    }

    /** One scan's job. */
    public final class Run {
        final String key;
        final String table;
        volatile String jobId;
        volatile String failure;
        volatile boolean ended;
        volatile long touched = System.currentTimeMillis();
        private boolean started;
        private List<NtfLayout> layouts;
        final Set<Integer> released = ConcurrentHashMap.newKeySet();
        /** Destinations released after all their streams ended. */
        final Set<Integer> complete = ConcurrentHashMap.newKeySet();
        final int destinations;

        Run(String key, String table, int destinations) {
            this.key = key;
            this.table = table;
            this.destinations = destinations;
        }

        String name() {
            return "Jumpgate job " + (jobId == null ? "(not submitted; scan " + key + ")" : jobId) + " for " + table;
        }

        NtfLayout layout(int index) {
            return layouts.get(index);
        }

        Destination destination(int index) {
            return service.destination(key, index).orElseThrow(() ->
                    new TrinoException(JumpgateErrorCode.JUMPGATE_JOB_FAILED, name() + ": destination " + index + " is gone"
                            + (failure == null ? "" : ": " + failure)));
        }

        /** Whether the job's time (jumpgate.job-timeout) is over: then it is cancelled and the query fails. */
        void checkDeadline(long startedMillis) {
            touched = System.currentTimeMillis();
            if (touched > startedMillis + config.jobTimeoutMs()) {
                client.cancelQuietly(jobId);
                throw new TrinoException(JumpgateErrorCode.JUMPGATE_TIMEOUT, name() + " did not finish within "
                        + config.jobTimeoutMs() / 1000 + " s (jumpgate.job-timeout)");
            }
        }

        /**
         * The failure of a destination that broke or was closed (the job failed, or its server went
         * away): the job's own reason if the watcher hears it within a moment, else the stream's.
         */
        TrinoException broken(int index, Destination d) {
            // A broken stream usually follows a failing NCA or server: give the watcher a moment to hear why.
            long settle = System.currentTimeMillis() + SETTLE_MS;
            while (failure == null && !ended && System.currentTimeMillis() < settle) {
                sleep(50);
            }
            String why = failure != null ? failure : name() + " failed: "
                    + d.failure().orElse("its destination " + index + " was closed before its streams ended");
            if (failure == null) {
                failure = why;
            }
            finish();
            return new TrinoException(JumpgateErrorCode.JUMPGATE_JOB_FAILED, why);
        }

        /** Waits for destination {@code index} to be complete; raises the job's failure. */
        Destination await(int index) {
            Destination d = destination(index);
            long deadline = System.currentTimeMillis() + config.jobTimeoutMs();
            try {
                while (!d.await(TimeUnit.MILLISECONDS.toNanos(200))) {
                    touched = System.currentTimeMillis();
                    if (failure != null) {
                        finish();
                        throw new TrinoException(JumpgateErrorCode.JUMPGATE_JOB_FAILED, failure);
                    }
                    if (System.currentTimeMillis() > deadline) {
                        client.cancelQuietly(jobId);
                        throw new TrinoException(JumpgateErrorCode.JUMPGATE_TIMEOUT, name() + " did not finish within "
                                + config.jobTimeoutMs() / 1000 + " s (jumpgate.job-timeout)");
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new TrinoException(JumpgateErrorCode.JUMPGATE_JOB_FAILED, name() + ": interrupted");
            }
            if (d.failure().isPresent() || !d.isComplete()) { // failed, or closed because the job failed
                throw broken(index, d);
            }
            return d;
        }

        void release(int index) {
            if (service.destination(key, index).map(Destination::isComplete).orElse(false)) {
                complete.add(index);
            }
            service.release(key, index);
            released.add(index);
            touched = System.currentTimeMillis();
            if (released.size() == destinations) {
                finish();
            }
        }

        /** Drops the run: cancels its job if it still runs, closes all its destinations. Idempotent. */
        void finish() {
            if (runs.remove(key, this) && released.size() < destinations) {
                dropped.put(key, failure != null ? failure : name() + " was dropped before all its output was read");
            }
            // A job whose every destination got all its streams has done its work: it ends by itself
            // (its teardown may still be under way), so it is not cancelled, and its record says
            // it succeeded. Anything less (a LIMIT satisfied, a failed query) cancels it.
            if (!ended && jobId != null && complete.size() < destinations) {
                client.cancelQuietly(jobId);
            }
            service.release(key);
        }
    }

    /** The run of {@code split}'s scan, started by the first caller. */
    public Run start(JumpgateSplit split, JumpgateTableHandle handle, DataRoot dataRoot, List<JumpgateColumnHandle> columns) {
        String gone = dropped.get(split.key());
        if (gone != null) {
            throw new TrinoException(JumpgateErrorCode.JUMPGATE_JOB_FAILED, gone);
        }
        Run run = runs.computeIfAbsent(split.key(), k -> new Run(k, handle.schemaTableName().toString(), split.destinations()));
        synchronized (run) {
            if (run.failure != null) {
                throw new TrinoException(JumpgateErrorCode.JUMPGATE_JOB_FAILED, run.failure);
            }
            if (!run.started) {
                run.started = true;
                launch(run, split, handle, dataRoot, columns);
            }
        }
        return run;
    }

    private void launch(Run run, JumpgateSplit split, JumpgateTableHandle handle, DataRoot dataRoot, List<JumpgateColumnHandle> columns) {
        try {
            List<Integer> ports = service.open(run.key, split.destinations(), config.listenAddress(), MAX_BUFFER_BYTES,
                    "the Trino connector's buffer cap", config.streaming());
            Request request = RequestBuilder.build("trino-" + run.key, handle, dataRoot, split.groups(), split.dynamicFilters(), columns,
                    advertisedHost, ports);
            LOG.fine(() -> "Jumpgate request for " + run.table + ": " + request.toJson());
            // One call compiles and starts the job: the destinations listen already, and their
            // readers hold a stream until `expect` below gives its layout (Destination).
            CompiledJob job = JumpgateClient.retryOn503(config.jobTimeoutMs(), () -> client.submitAndExecute(request));
            run.jobId = job.jobId();
            service.attachJob(run.key, job.jobId());
            List<NtfLayout> layouts = new ArrayList<>();
            List<Integer> expected = new ArrayList<>();
            List<Integer> fixed = new ArrayList<>();
            for (int i = 0; i < split.destinations(); i++) {
                OutputInfo o = job.output(RequestBuilder.sendName(i)).orElseThrow(() ->
                        new IOException("the server's answer has no output " + RequestBuilder.sendName(0)));
                NtfLayout l = o.layout();
                layouts.add(l);
                expected.add(o.expectedStreams());
                fixed.add(l.fixedSize());
            }
            run.layouts = layouts;
            service.expect(run.key, expected, fixed);
            if (!job.started()) { // a server that compiles only
                JumpgateClient.retryOn503(config.jobTimeoutMs(), () -> {
                    client.execute(job.jobId());
                    return null;
                });
            }
            Thread w = new Thread(() -> watch(run), "jumpgate-trino-job-" + job.jobId());
            w.setDaemon(true);
            w.start();
        } catch (ServerUnreachable e) {
            throw fail(run, JumpgateErrorCode.JUMPGATE_UNREACHABLE, "the Jumpgate server at " + config.url()
                    + " is unreachable (" + run.name() + "): " + e.getMessage(), e);
        } catch (RequestRejected e) {
            throw fail(run, JumpgateErrorCode.JUMPGATE_REJECTED, run.name() + " was rejected by the server (HTTP " + e.status()
                    + e.operation().map(o -> ", operation " + o).orElse("") + "): " + e.serverMessage(), e);
        } catch (IOException | RuntimeException e) {
            throw fail(run, JumpgateErrorCode.JUMPGATE_JOB_FAILED, run.name() + " could not start: " + e.getMessage(), e);
        }
    }

    private TrinoException fail(Run run, JumpgateErrorCode code, String message, Exception cause) {
        run.failure = message;
        run.ended = true;
        if (run.jobId != null) {
            client.cancelQuietly(run.jobId);
        }
        service.release(run.key);
        LOG.log(Level.WARNING, message);
        return new TrinoException(code, message, cause);
    }

    private void watch(Run run) {
        int unreachable = 0;
        while (!run.ended) {
            try {
                JobStatus st = client.status(run.jobId, POLL_S);
                unreachable = 0;
                if (st.terminal()) {
                    if (!st.succeeded()) {
                        run.failure = run.name() + " " + st.state() + ": " + st.errorMessage().orElse("no reason given");
                        LOG.warning(run.failure);
                    }
                    run.ended = true;
                    if (run.failure != null) {
                        run.finish(); // nothing of a failed job is read: close its destinations now
                    }
                    return;
                }
            } catch (IOException e) {
                // The server went away: its streams break, or never come. Say so once it is clear.
                if (++unreachable >= 3 || run.released.size() == run.destinations) {
                    run.failure = "the Jumpgate server at " + config.url() + " stopped answering during " + run.name() + ": " + e.getMessage();
                    LOG.warning(run.failure);
                    run.ended = true;
                    run.finish();
                    return;
                }
                sleep(200);
            } catch (RuntimeException e) {
                run.failure = run.name() + ": " + e;
                run.ended = true;
                run.finish();
                return;
            }
        }
    }

    private void reap() {
        long now = System.currentTimeMillis();
        for (Run r : List.copyOf(runs.values())) {
            if (now - r.touched > IDLE_MS && (r.ended || now - r.touched > config.jobTimeoutMs())) {
                LOG.info("Jumpgate: releasing the leftovers of " + r.name());
                r.finish();
            }
        }
        if (dropped.size() > 10_000) {
            dropped.clear(); // queries that never reached cleanupQuery: keep the map bounded
        }
    }

    /** The end of a query (ConnectorMetadata.cleanupQuery): drop what its scans left unread. */
    public void queryEnded(String queryId) {
        String prefix = keyPrefix(queryId);
        for (Run r : List.copyOf(runs.values())) {
            if (r.key.startsWith(prefix)) {
                r.finish();
            }
        }
        dropped.keySet().removeIf(k -> k.startsWith(prefix));
    }

    static String keyPrefix(String queryId) {
        return "trino-" + queryId + "-";
    }

    public int running() {
        return runs.size();
    }

    @Override
    public void close() {
        reaper.shutdownNow();
        for (Run r : List.copyOf(runs.values())) {
            r.finish();
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
