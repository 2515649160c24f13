package io.jumpgate.trino;

import io.trino.spi.Node;
import io.trino.spi.NodeManager;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorSplit;
import io.trino.spi.connector.ConnectorSplitManager;
import io.trino.spi.connector.ConnectorSplitSource;
import io.trino.spi.connector.ConnectorTableHandle;
import io.trino.spi.connector.ConnectorTransactionHandle;
import io.trino.spi.connector.Constraint;
import io.trino.spi.connector.DynamicFilter;
import io.trino.spi.connector.FixedSplitSource;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * One split per destination of the scan's Jumpgate job. The table's files are dealt into at most
 * {@code jumpgate.max-streams} groups of about equal bytes, one read and one send each; a pushed
 * aggregation must return final aggregates, so it reads every file in one group. A scan that
 * Trino's dynamic filters cover gets its splits once they are known ({@link DynamicFilterSplitSource}).
 */
public final class JumpgateSplitManager implements ConnectorSplitManager {
    private final JumpgateConfig config;
    private final DataRoot dataRoot;
    private final NodeManager nodes;

    public JumpgateSplitManager(JumpgateConfig config, DataRoot dataRoot, NodeManager nodes) {
        this.config = config;
        this.dataRoot = dataRoot;
        this.nodes = nodes;
    }

    /**
     * The worker all splits of the scan {@code key} go to ("host:port"): a job's destinations
     * are opened together by the first split read, in that node's JVM, so a split read elsewhere
     * would start the same job again. Scans are spread over the workers by their key's hash.
     */
    private String node(String key) {
        List<Node> workers = new ArrayList<>(nodes.getWorkerNodes());
        if (workers.isEmpty()) {
            return null;
        }
        workers.sort(Comparator.comparing(Node::getNodeIdentifier));
        return workers.get(Math.floorMod(key.hashCode(), workers.size())).getHostAndPort().toString();
    }

    @Override
    public ConnectorSplitSource getSplits(ConnectorTransactionHandle transaction, ConnectorSession session, ConnectorTableHandle handle,
                                          DynamicFilter dynamicFilter, Constraint constraint) {
        JumpgateTableHandle h = (JumpgateTableHandle) handle;
        String key = JobRuns.keyPrefix(session.getQueryId()) + UUID.randomUUID().toString().substring(0, 8);
        List<List<String>> groups;
        if (h.join().isPresent()) {
            // A pushed join reads all its tables' files in one job with one destination.
            for (JumpgateTableHandle b : h.baseTables()) {
                dataRoot.table(b.schema(), b.table()).orElseThrow(() ->
                        new IllegalStateException("table " + b.schemaTableName() + " is no longer under " + dataRoot.root()));
            }
            groups = List.of(List.of());
        } else {
            DataRoot.Table t = dataRoot.table(h.schema(), h.table()).orElseThrow(() ->
                    new IllegalStateException("table " + h.schemaTableName() + " is no longer under " + dataRoot.root()));
            if (t.files().isEmpty()) {
                return new FixedSplitSource(List.of());
            }
            int n = h.aggregation().isPresent() ? 1 : Math.min(config.maxStreams(), t.files().size());
            groups = balance(t.files(), n);
        }
        // Waiting holds the job back until the filter's build side is done. A small table is read
        // soon enough whole (Trino still applies the filter above the scan): TPC-H Q22's customer
        // scan waited for the average of another customer scan, and the query took a quarter longer.
        String node = node(key);
        if (dynamicFilter.getColumnsCovered().isEmpty() || config.dynamicFilterWaitMs() == 0 || h.aggregation().isPresent()
                || fileBytes(h) < config.dynamicFilterMinBytes()) {
            return new FixedSplitSource(splits(key, groups, Map.of(), node));
        }
        return new DynamicFilterSplitSource(dynamicFilter, config.dynamicFilterWaitMs(), h,
                conditions -> splits(key, groups, conditions, node));
    }

    /** The bytes of all the files a scan reads. */
    private long fileBytes(JumpgateTableHandle h) {
        long n = 0;
        for (JumpgateTableHandle b : h.baseTables()) {
            n += dataRoot.table(b.schema(), b.table()).map(t -> t.files().stream().mapToLong(DataRoot.DataFile::bytes).sum()).orElse(0L);
        }
        return n;
    }

    private static List<ConnectorSplit> splits(String key, List<List<String>> groups, Map<String, String> dynamicFilters, String node) {
        List<ConnectorSplit> splits = new ArrayList<>();
        for (int i = 0; i < groups.size(); i++) {
            splits.add(new JumpgateSplit(key, i, groups.size(), groups, dynamicFilters, node));
        }
        return splits;
    }

    /** Largest file first into the group with the fewest bytes. */
    static List<List<String>> balance(List<DataRoot.DataFile> files, int n) {
        List<List<String>> groups = new ArrayList<>();
        long[] bytes = new long[n];
        for (int i = 0; i < n; i++) {
            groups.add(new ArrayList<>());
        }
        List<DataRoot.DataFile> sorted = new ArrayList<>(files);
        sorted.sort(Comparator.comparingLong(DataRoot.DataFile::bytes).reversed().thenComparing(DataRoot.DataFile::path));
        for (DataRoot.DataFile f : sorted) {
            int best = 0;
            for (int i = 1; i < n; i++) {
                if (bytes[i] < bytes[best]) {
                    best = i;
                }
            }
            groups.get(best).add(f.path());
            bytes[best] += f.bytes();
        }
        groups.removeIf(List::isEmpty);
        groups.forEach(g -> g.sort(String::compareTo));
        return groups;
    }
}
