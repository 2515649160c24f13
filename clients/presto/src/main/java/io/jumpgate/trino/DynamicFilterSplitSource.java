package io.jumpgate.trino;

import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.connector.ConnectorSplit;
import io.trino.spi.connector.ConnectorSplitSource;
import io.trino.spi.connector.DynamicFilter;
import io.trino.spi.predicate.Domain;
import io.trino.spi.predicate.TupleDomain;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.logging.Logger;

/**
 * The splits of one scan, held back until Trino's dynamic filters for it are known (or
 * {@code jumpgate.dynamic-filtering.wait-timeout} has passed). A Jumpgate job reads its files
 * once, start to end, so a filter that arrives after it started can no longer save anything: the
 * job must start with it. Trino narrows a join's probe side by what its build side holds (e.g.
 * TPC-H Q18's 57 order keys out of 1.5 million); the conditions go into the job's {@code filter}
 * over the base table that has the column ({@link RequestBuilder}), so the scan drops the rows
 * before they are converted and sent. Trino schedules a join's build side without waiting for
 * the probe side's splits, so waiting here cannot block the filter it waits for.
 */
final class DynamicFilterSplitSource implements ConnectorSplitSource {
    private static final Logger LOG = Logger.getLogger(DynamicFilterSplitSource.class.getName());
    /**
     * Discrete sets larger than this are sent as their span. An IN list of constants becomes a
     * sorted array searched by binary search in the job's generated code (a 10,000-value list
     * compiles in some 0.04 s), so it costs a few comparisons a row; the span of a few thousand
     * keys spread over the whole key range keeps almost every row (TPC-H Q20: 2,127 part keys
     * kept 799,500 of partsupp's 800,000 rows as a span). Trino itself collects at most 10,000
     * distinct values per driver for a large build side.
     */
    static final int MAX_VALUES = 10_000;

    private final DynamicFilter filter;
    private final long deadlineNanos;
    private final Function<Map<String, String>, List<ConnectorSplit>> splits;
    private final JumpgateTableHandle handle;
    private boolean done;

    /**
     * @param splits makes the scan's splits from the dynamic conditions (base column name → condition)
     */
    DynamicFilterSplitSource(DynamicFilter filter, long waitMs, JumpgateTableHandle handle, Function<Map<String, String>, List<ConnectorSplit>> splits) {
        this.filter = filter;
        this.deadlineNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        this.handle = handle;
        this.splits = splits;
    }

    @Override
    public CompletableFuture<ConnectorSplitBatch> getNextBatch(int maxSize) {
        long left = deadlineNanos - System.nanoTime();
        if (filter.isAwaitable() && left > 0) {
            // Not yet complete: come back when it narrows or the wait is over (an empty batch, not finished).
            return filter.isBlocked().completeOnTimeout(null, left, TimeUnit.NANOSECONDS)
                    .thenApply(ignored -> new ConnectorSplitBatch(List.of(), false));
        }
        done = true;
        Map<String, String> conditions = conditions(handle, filter.getCurrentPredicate());
        if (!conditions.isEmpty()) {
            LOG.fine(() -> "Jumpgate: " + handle.schemaTableName() + " starts with dynamic filters " + conditions.values()
                    + (filter.isComplete() ? "" : " (not complete when the wait ended)"));
        }
        return CompletableFuture.completedFuture(new ConnectorSplitBatch(splits.apply(conditions), true));
    }

    /**
     * The predicate as contract conditions per base column; what cannot be written is left out
     * (Trino applies it above the scan anyway). Through the equality keys of a pushed inner join a
     * condition on one key holds for the other too (rows of the other side without a partner are
     * dropped by the join), so it is copied there: Trino filters the side it knows of, often the
     * smaller, and the other side's scan is spared as well. A left outer join copies only from its
     * left (kept) side to its right.
     */
    static Map<String, String> conditions(JumpgateTableHandle handle, TupleDomain<ColumnHandle> predicate) {
        Map<String, String> out = new LinkedHashMap<>();
        if (predicate.isNone()) {
            out.put("", "FALSE"); // the build side is empty: nothing of the probe side can match
            return out;
        }
        Map<String, JumpgateColumnHandle> columns = new LinkedHashMap<>();
        Map<String, Domain> domains = new LinkedHashMap<>();
        for (Map.Entry<ColumnHandle, Domain> e : predicate.getDomains().orElse(Map.of()).entrySet()) {
            JumpgateColumnHandle c = (JumpgateColumnHandle) e.getKey();
            if (!c.synthetic()) { // not an output of a pushed aggregation or projection, which the scan does not read
                columns.put(c.name(), c);
                domains.put(c.name(), e.getValue());
            }
        }
        for (boolean grew = true; grew; ) {
            grew = propagate(handle, columns, domains);
        }
        for (Map.Entry<String, Domain> e : domains.entrySet()) {
            try {
                out.put(e.getKey(), Sql.domain(columns.get(e.getKey()), e.getValue().simplify(MAX_VALUES)));
            } catch (Sql.Unsupported u) {
                // stays with Trino's own filtering above the scan
            }
        }
        return out;
    }

    private static boolean propagate(JumpgateTableHandle h, Map<String, JumpgateColumnHandle> columns, Map<String, Domain> domains) {
        if (h.join().isEmpty()) {
            return false;
        }
        JumpgateTableHandle.PushedJoin j = h.join().get();
        boolean grew = propagate(j.left(), columns, domains) | propagate(j.right(), columns, domains);
        for (int i = 0; i < j.leftKeys().size(); i++) {
            String l = plainColumn(j.leftKeys().get(i));
            String r = plainColumn(j.rightKeys().get(i));
            if (l == null || r == null) {
                continue;
            }
            grew |= copy(l, r, columns, domains);
            if (j.type().equals("inner")) {
                grew |= copy(r, l, columns, domains);
            }
        }
        return grew;
    }

    private static boolean copy(String from, String to, Map<String, JumpgateColumnHandle> columns, Map<String, Domain> domains) {
        Domain d = domains.get(from);
        if (d == null) {
            return false;
        }
        Domain merged = domains.containsKey(to) ? domains.get(to).intersect(d) : d;
        if (merged.equals(domains.get(to))) {
            return false;
        }
        domains.put(to, merged);
        columns.putIfAbsent(to, JumpgateColumnHandle.base(to, columns.get(from).type()));
        return true;
    }

    /** The column name of a join key that is a plain column ({@code "name"}), else null. */
    private static String plainColumn(String key) {
        if (key.length() < 2 || key.charAt(0) != '"' || key.charAt(key.length() - 1) != '"') {
            return null;
        }
        String inner = key.substring(1, key.length() - 1);
        return inner.replace("\"\"", "").contains("\"") ? null : inner.replace("\"\"", "\"");
    }

    @Override
    public void close() {
        done = true;
    }

    @Override
    public boolean isFinished() {
        return done;
    }
}
