package io.jumpgate.trino;

import io.jumpgate.core.request.JsonObject;
import io.jumpgate.core.request.Op;
import io.jumpgate.core.request.Ops;
import io.jumpgate.core.request.Request;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The dataflow request (contract §1) of one scan. Per file group {@code g} of a table:
 * {@code read_g → [filter_g] → [agg_g → [having_g]] → project_g → out_g<g>} (send to destination g). A pushed
 * join reads every file of its tables in one group: {@code read_*, [filter_*] → join_* → [filter] →
 * [agg] → project → out_g0}; a side of it with its own pushed aggregation (TPC-H Q4's distinct
 * order keys of lineitem) is {@code read_* → [filter_*] → agg_* → [having_*]} under the join.
 */
public final class RequestBuilder {
    private RequestBuilder() {}

    public static String sendName(int g) {
        return "out_g" + g;
    }

    public static Request build(String label, JumpgateTableHandle h, DataRoot dataRoot, List<List<String>> groups,
                                List<JumpgateColumnHandle> columns, String host, List<Integer> ports) {
        return build(label, h, dataRoot, groups, Map.of(), columns, host, ports);
    }

    /**
     * With {@code dynamicFilters} (base column name → condition; the key {@code ""} for a
     * condition on no column, e.g. FALSE): each is ANDed to the filter of the base table that has
     * the column.
     */
    public static Request build(String label, JumpgateTableHandle h, DataRoot dataRoot, List<List<String>> groups,
                                Map<String, String> dynamicFilters, List<JumpgateColumnHandle> columns, String host, List<Integer> ports) {
        List<JsonObject> out = new ArrayList<>();
        for (JumpgateColumnHandle c : columns) {
            out.add(Ops.expr(c.name(), c.expr()));
        }
        if (out.isEmpty()) {
            out.add(Ops.expr("_row", "TRUE")); // a row count only (count(*) kept in Trino): one small column
        }
        // A pushed join passes every column of its inputs on; a table's scan need only read the
        // columns named above it (outputs, join keys, conditions over the join, the aggregation).
        Set<String> needed = null;
        if (h.join().isPresent()) {
            needed = new HashSet<>();
            for (JumpgateColumnHandle c : columns) {
                needed.addAll(identifiers(c.expr()));
            }
            needed.addAll(namesAbove(h));
        }
        List<Op> ops = new ArrayList<>();
        for (int g = 0; g < groups.size(); g++) {
            String input = relation(h, dataRoot, h.join().isPresent() ? null : groups.get(g), "g" + g, dynamicFilters, needed, ops, false);
            if (h.aggregation().isPresent()) {
                input = aggregation(h.aggregation().get(), input, "g" + g, ops);
            }
            ops.add(Ops.project("project_g" + g, input, out));
            ops.add(Ops.send(sendName(g), "project_g" + g, host, ports.get(g)));
        }
        return new Request(label, ops);
    }

    /** Adds a complete aggregation over {@code input} and its HAVING conditions; the name of the last. */
    private static String aggregation(JumpgateTableHandle.PushedAggregation a, String input, String tag, List<Op> ops) {
        List<JsonObject> groupBy = new ArrayList<>();
        for (JumpgateTableHandle.Item i : a.groupBy()) {
            groupBy.add(Ops.expr(i.name(), i.expr()));
        }
        List<JsonObject> aggs = new ArrayList<>();
        for (JumpgateTableHandle.Item i : a.aggregates()) {
            aggs.add(Ops.aggregate(i.name(), i.fn(), i.expr()));
        }
        ops.add(Ops.aggregate("agg_" + tag, input, groupBy, aggs, "complete"));
        input = "agg_" + tag;
        if (!a.having().isEmpty()) {
            ops.add(Ops.filter("having_" + tag, input, String.join(" AND ", a.having())));
            input = "having_" + tag;
        }
        return input;
    }

    /**
     * Adds the operations of {@code h}'s relation; the name of the last. The top relation's
     * aggregation is added by the caller; a join's side ({@code nested}) adds its own.
     */
    private static String relation(JumpgateTableHandle h, DataRoot dataRoot, List<String> files, String tag,
                                   Map<String, String> dynamicFilters, Set<String> needed, List<Op> ops, boolean nested) {
        String input;
        List<String> conditions = new ArrayList<>(h.filters());
        List<JsonObject> kept = null;
        boolean aggregated = nested && h.aggregation().isPresent();
        if (h.join().isPresent()) {
            JumpgateTableHandle.PushedJoin j = h.join().get();
            String probe = relation(j.left(), dataRoot, null, tag + "l", dynamicFilters, needed, ops, true);
            String build = relation(j.right(), dataRoot, null, tag + "r", dynamicFilters, needed, ops, true);
            input = "join_" + tag;
            ops.add(Ops.join(input, build, probe, j.rightKeys(), j.leftKeys(), j.type()));
        } else {
            DataRoot.Table t = dataRoot.table(h.schema(), h.table()).orElseThrow(() ->
                    new IllegalStateException("table " + h.schemaTableName() + " is no longer under " + dataRoot.root()));
            List<JsonObject> schema = new ArrayList<>();
            // Dynamic conditions name the columns as the job does: back to the base names here.
            Map<String, String> baseNames = new HashMap<>();
            h.renames().forEach((base, renamed) -> baseNames.put(renamed, base));
            for (DataRoot.Column c : t.columns()) {
                schema.add(Ops.column(c.name(), c.type()));
                String name = h.jobName(c.name());
                if (aggregated) {
                    continue; // its columns are not the join's: the aggregation's are (below)
                }
                if (needed != null && needed.contains(name)) {
                    (kept == null ? kept = new ArrayList<>() : kept).add(Ops.expr(name, Sql.ident(c.name())));
                }
                String dynamic = dynamicFilters.get(name);
                if (dynamic != null) {
                    conditions.add(Sql.renamed(dynamic, baseNames));
                }
            }
            if (aggregated) {
                // A dynamic filter on a group key that is a base column holds for its rows too
                // (a group it removes the join would drop whole); one on an aggregate does not.
                for (JumpgateTableHandle.Item i : h.aggregation().get().groupBy()) {
                    String dynamic = dynamicFilters.get(i.name());
                    Set<String> columns = identifiers(i.expr());
                    if (dynamic != null && columns.size() == 1 && i.expr().equals(Sql.ident(columns.iterator().next()))) {
                        conditions.add(Sql.renamed(dynamic, Map.of(i.name(), columns.iterator().next())));
                    }
                }
            }
            if (dynamicFilters.containsKey("")) {
                conditions.add(dynamicFilters.get(""));
            }
            input = "read_" + tag;
            ops.add(Ops.read(input, files != null ? files : t.files().stream().map(DataRoot.DataFile::path).toList(),
                    t.format(), schema));
        }
        if (!conditions.isEmpty()) {
            ops.add(Ops.filter("filter_" + tag, input, String.join(" AND ", conditions)));
            input = "filter_" + tag;
        }
        if (kept != null && h.join().isEmpty()) {
            ops.add(Ops.project("columns_" + tag, input, kept)); // fused into the scan: it reads only these
            input = "columns_" + tag;
        }
        if (aggregated) {
            input = aggregation(h.aggregation().get(), input, tag, ops); // fused into the scan as well
        }
        return input;
    }

    /** The column names the join keys, the conditions over joins and the aggregation of {@code h} refer to. */
    private static Set<String> namesAbove(JumpgateTableHandle h) {
        Set<String> names = new HashSet<>();
        if (h.join().isEmpty()) {
            return names; // a table's own conditions run in its scan, before the columns are narrowed
        }
        JumpgateTableHandle.PushedJoin j = h.join().get();
        for (String k : j.leftKeys()) {
            names.addAll(identifiers(k));
        }
        for (String k : j.rightKeys()) {
            names.addAll(identifiers(k));
        }
        h.filters().forEach(f -> names.addAll(identifiers(f)));
        h.aggregation().ifPresent(a -> {
            a.groupBy().forEach(i -> names.addAll(identifiers(i.expr())));
            a.aggregates().forEach(i -> names.addAll(identifiers(i.expr())));
        });
        names.addAll(namesAbove(j.left()));
        names.addAll(namesAbove(j.right()));
        return names;
    }

    /** The columns a contract expression names ({@link Sql#identifiers}). */
    static Set<String> identifiers(String expr) {
        return Sql.identifiers(expr);
    }
}
