package io.jumpgate.trino;

import io.jumpgate.core.ntf.NtfBatch;
import io.jumpgate.core.ntf.NtfFormatException;
import io.jumpgate.core.ntf.NtfReader;
import io.jumpgate.core.receive.Chunk;
import io.jumpgate.core.receive.Destination;
import io.jumpgate.core.receive.StreamData;
import io.trino.spi.TrinoException;
import io.trino.spi.connector.ConnectorPageSource;
import io.trino.spi.connector.SourcePage;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Reads one destination of the scan's job: starts the job if it is the scan's first page source,
 * then hands Trino pages of up to {@link #ROWS_PER_PAGE} rows decoded in place from the received
 * chunks. Streaming (jumpgate.streaming, the default): chunks are decoded as they arrive while the
 * job runs, and {@link #isBlocked()} tells Trino when the next one is there; a stream that breaks
 * later fails the query, so no partial answer is ever returned as a result. Buffered: waits until
 * the destination's streams have ended, complete and counted, first.
 */
public final class JumpgatePageSource implements ConnectorPageSource {
    static final int ROWS_PER_PAGE = 8192;

    private final JobRuns runs;
    private final JumpgateSplit split;
    private final JumpgateTableHandle handle;
    private final DataRoot dataRoot;
    private final List<JumpgateColumnHandle> columns;
    private JobRuns.Run run;
    private NtfPageDecoder decoder;
    private NtfReader reader;
    private Destination streaming; // the destination, when its chunks stream in
    private Chunk held; // the streaming chunk being decoded: its memory goes back once done
    private long startedMillis;
    private List<Chunk> chunks;
    private int chunk;
    private NtfBatch batch;
    private int row;
    private long completedBytes;
    private long completedRows;
    private long readNanos;
    private boolean finished;
    private boolean closed;

    JumpgatePageSource(JobRuns runs, JumpgateSplit split, JumpgateTableHandle handle, DataRoot dataRoot, List<JumpgateColumnHandle> columns) {
        this.runs = runs;
        this.split = split;
        this.handle = handle;
        this.dataRoot = dataRoot;
        this.columns = columns;
    }

    private void open() {
        long t0 = System.nanoTime();
        startedMillis = System.currentTimeMillis();
        run = runs.start(split, handle, dataRoot, columns);
        try {
            decoder = new NtfPageDecoder(run.layout(split.index()), columns);
            reader = new NtfReader(run.layout(split.index()));
            Destination d = run.destination(split.index());
            if (d.isStreaming()) {
                streaming = d;
            } else {
                d = run.await(split.index());
                chunks = new ArrayList<>();
                for (StreamData s : d.data()) {
                    chunks.addAll(s.chunks());
                    completedBytes += s.bytes();
                }
            }
        } catch (IOException | IllegalArgumentException e) {
            throw new TrinoException(JumpgateErrorCode.JUMPGATE_JOB_FAILED, run.name() + ": " + e.getMessage(), e);
        }
        readNanos += System.nanoTime() - t0;
    }

    /** The next chunk to decode; null when there is none yet (streaming) or no more ({@link #finished}). */
    private Chunk nextChunk() {
        if (streaming == null) {
            if (chunk >= chunks.size()) {
                finished = true;
                return null;
            }
            Chunk c = chunks.get(chunk);
            chunks.set(chunk++, null); // let the buffer go once decoded
            return c;
        }
        if (held != null) {
            streaming.consumed(held);
            held = null;
        }
        Chunk c = streaming.poll();
        if (c == null && streaming.isComplete()) {
            c = streaming.poll(); // every chunk was queued before the last stream ended
            if (c == null) {
                finished = true;
                return null;
            }
        }
        if (c == null) {
            if (streaming.failure().isPresent() || streaming.isClosed() || run.failure != null) {
                throw run.broken(split.index(), streaming);
            }
            run.checkDeadline(startedMillis);
            return null;
        }
        held = c;
        completedBytes += c.end();
        return c;
    }

    @Override
    public SourcePage getNextSourcePage() {
        if (finished) {
            return null;
        }
        if (run == null) {
            open();
        }
        long t0 = System.nanoTime();
        try {
            while (batch == null || row >= batch.size()) {
                Chunk c = nextChunk();
                if (c == null) {
                    if (finished) {
                        close();
                    }
                    return null;
                }
                batch = NtfBatch.index(reader, c.bytes(), 0, c.end(), c.tuples());
                row = 0;
            }
            int n = Math.min(ROWS_PER_PAGE, batch.size() - row);
            SourcePage page = SourcePage.create(decoder.decode(batch, row, n));
            row += n;
            completedRows += n;
            return page;
        } catch (NtfFormatException | ArithmeticException e) {
            throw new TrinoException(JumpgateErrorCode.JUMPGATE_JOB_FAILED, run.name() + ": bad tuple: " + e.getMessage(), e);
        } finally {
            readNanos += System.nanoTime() - t0;
        }
    }

    /**
     * Streaming: done when a chunk is waiting or the destination ended, failed or closed; at the
     * latest after a second, so the job's deadline is checked while nothing arrives.
     */
    @Override
    public CompletableFuture<?> isBlocked() {
        if (streaming == null || finished || closed) {
            return NOT_BLOCKED;
        }
        CompletableFuture<Void> f = streaming.whenReady();
        return f.isDone() ? NOT_BLOCKED : f.copy().completeOnTimeout(null, 1, TimeUnit.SECONDS);
    }

    @Override
    public long getCompletedBytes() {
        return completedBytes;
    }

    @Override
    public java.util.OptionalLong getCompletedPositions() {
        return java.util.OptionalLong.of(completedRows);
    }

    @Override
    public long getReadTimeNanos() {
        return readNanos;
    }

    @Override
    public boolean isFinished() {
        return finished;
    }

    @Override
    public long getMemoryUsage() {
        return batch == null ? 0 : batch.buffer().length;
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        finished = true;
        chunks = null;
        batch = null;
        held = null;
        if (run != null) {
            run.release(split.index());
        }
    }
}
