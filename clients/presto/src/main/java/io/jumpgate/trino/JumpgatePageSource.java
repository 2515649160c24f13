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

/**
 * Reads one destination of the scan's job: starts the job if it is the scan's first page source,
 * waits for the destination's streams to end (complete and counted), then hands Trino pages of up
 * to {@link #ROWS_PER_PAGE} rows decoded from the buffered chunks in place.
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
        run = runs.start(split, handle, dataRoot, columns);
        Destination d = run.await(split.index());
        try {
            decoder = new NtfPageDecoder(run.layout(split.index()), columns);
            reader = new NtfReader(run.layout(split.index()));
            chunks = new ArrayList<>();
            for (StreamData s : d.data()) {
                chunks.addAll(s.chunks());
                completedBytes += s.bytes();
            }
        } catch (IOException | IllegalArgumentException e) {
            throw new TrinoException(JumpgateErrorCode.JUMPGATE_JOB_FAILED, run.name() + ": " + e.getMessage(), e);
        }
        readNanos += System.nanoTime() - t0;
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
                if (chunk >= chunks.size()) {
                    finished = true;
                    close();
                    return null;
                }
                Chunk c = chunks.get(chunk);
                chunks.set(chunk++, null); // let the buffer go once decoded
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
        if (run != null) {
            run.release(split.index());
        }
    }
}
