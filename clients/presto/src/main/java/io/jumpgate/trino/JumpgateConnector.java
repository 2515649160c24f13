package io.jumpgate.trino;

import io.trino.spi.NodeManager;

import io.trino.spi.connector.Connector;
import io.trino.spi.connector.ConnectorMetadata;
import io.trino.spi.connector.ConnectorPageSourceProvider;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorSplitManager;
import io.trino.spi.connector.ConnectorTransactionHandle;
import io.trino.spi.transaction.IsolationLevel;

/** A read-only catalog over a Jumpgate server's data root. */
public final class JumpgateConnector implements Connector {
    private final JumpgateConfig config;
    private final DataRoot dataRoot;
    private final JobRuns runs;
    private final JumpgateSplitManager splits;
    private final JumpgatePageSourceProvider pages;

    public JumpgateConnector(String catalogName, JumpgateConfig config, NodeManager nodes) {
        this.config = config;
        this.dataRoot = new DataRoot(config.dataRoot());
        String listen = config.listenAddress();
        boolean everywhere = listen.equals("0.0.0.0") || listen.equals("::") || listen.equals("[::]");
        this.runs = new JobRuns(config, everywhere ? nodes.getCurrentNode().getHost() : listen);
        this.splits = new JumpgateSplitManager(config, dataRoot, nodes);
        this.pages = new JumpgatePageSourceProvider(runs, dataRoot);
    }

    @Override
    public ConnectorTransactionHandle beginTransaction(IsolationLevel isolationLevel, boolean readOnly, boolean autoCommit) {
        return JumpgateTransactionHandle.INSTANCE;
    }

    @Override
    public ConnectorMetadata getMetadata(ConnectorSession session, ConnectorTransactionHandle transaction) {
        return new JumpgateMetadata(config, dataRoot, runs);
    }

    @Override
    public ConnectorSplitManager getSplitManager() {
        return splits;
    }

    @Override
    public ConnectorPageSourceProvider getPageSourceProvider() {
        return pages;
    }

    @Override
    public void shutdown() {
        runs.close();
    }
}
