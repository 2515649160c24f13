package io.jumpgate.trino;

import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.connector.ConnectorPageSource;
import io.trino.spi.connector.ConnectorPageSourceProvider;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorSplit;
import io.trino.spi.connector.ConnectorTableHandle;
import io.trino.spi.connector.ConnectorTransactionHandle;
import io.trino.spi.connector.DynamicFilter;

import java.util.ArrayList;
import java.util.List;

public final class JumpgatePageSourceProvider implements ConnectorPageSourceProvider {
    private final JobRuns runs;
    private final DataRoot dataRoot;

    public JumpgatePageSourceProvider(JobRuns runs, DataRoot dataRoot) {
        this.runs = runs;
        this.dataRoot = dataRoot;
    }

    @Override
    public ConnectorPageSource createPageSource(ConnectorTransactionHandle transaction, ConnectorSession session, ConnectorSplit split,
                                                ConnectorTableHandle table, List<ColumnHandle> columns, DynamicFilter dynamicFilter) {
        JumpgateTableHandle h = (JumpgateTableHandle) table;
        List<JumpgateColumnHandle> cols = new ArrayList<>();
        for (ColumnHandle c : columns) {
            cols.add((JumpgateColumnHandle) c);
        }
        return new JumpgatePageSource(runs, (JumpgateSplit) split, h, dataRoot, cols);
    }
}
