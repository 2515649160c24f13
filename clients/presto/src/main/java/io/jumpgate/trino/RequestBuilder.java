package io.jumpgate.trino;

import io.jumpgate.core.request.JsonObject;
import io.jumpgate.core.request.Op;
import io.jumpgate.core.request.Ops;
import io.jumpgate.core.request.Request;

import java.util.ArrayList;
import java.util.List;

/**
 * The dataflow request (contract §1) of one scan. Per file group {@code g} of a table:
 * {@code read_g → [filter_g] → [agg_g] → project_g → out_g<g>} (send to destination g). A pushed
 * join reads every file of its tables in one group: {@code read_*, [filter_*] → join_* → [filter] →
 * [agg] → project → out_g0}.
 */
public final class RequestBuilder {
    private RequestBuilder() {}

    public static String sendName(int g) {
        return "out_g" + g;
    }

    public static Request build(String label, JumpgateTableHandle h, DataRoot dataRoot, List<List<String>> groups,
                                List<JumpgateColumnHandle> columns, String host, List<Integer> ports) {
        List<JsonObject> out = new ArrayList<>();
        for (JumpgateColumnHandle c : columns) {
            out.add(Ops.expr(c.name(), c.expr()));
        }
        if (out.isEmpty()) {
            out.add(Ops.expr("_row", "TRUE")); // a row count only (count(*) kept in Trino): one small column
        }
        List<Op> ops = new ArrayList<>();
        for (int g = 0; g < groups.size(); g++) {
            String input = relation(h, dataRoot, h.join().isPresent() ? null : groups.get(g), "g" + g, ops);
            if (h.aggregation().isPresent()) {
                JumpgateTableHandle.PushedAggregation a = h.aggregation().get();
                List<JsonObject> groupBy = new ArrayList<>();
                for (JumpgateTableHandle.Item i : a.groupBy()) {
                    groupBy.add(Ops.expr(i.name(), i.expr()));
                }
                List<JsonObject> aggs = new ArrayList<>();
                for (JumpgateTableHandle.Item i : a.aggregates()) {
                    aggs.add(Ops.aggregate(i.name(), i.fn(), i.expr()));
                }
                ops.add(Ops.aggregate("agg_g" + g, input, groupBy, aggs, "complete"));
                input = "agg_g" + g;
            }
            ops.add(Ops.project("project_g" + g, input, out));
            ops.add(Ops.send(sendName(g), "project_g" + g, host, ports.get(g)));
        }
        return new Request(label, ops);
    }

    /** Adds the operations of {@code h}'s relation (before its aggregation); the name of the last. */
    private static String relation(JumpgateTableHandle h, DataRoot dataRoot, List<String> files, String tag, List<Op> ops) {
        String input;
        if (h.join().isPresent()) {
            JumpgateTableHandle.PushedJoin j = h.join().get();
            String probe = relation(j.left(), dataRoot, null, tag + "l", ops);
            String build = relation(j.right(), dataRoot, null, tag + "r", ops);
            input = "join_" + tag;
            ops.add(Ops.join(input, build, probe, j.rightKeys(), j.leftKeys(), j.type()));
        } else {
            DataRoot.Table t = dataRoot.table(h.schema(), h.table()).orElseThrow(() ->
                    new IllegalStateException("table " + h.schemaTableName() + " is no longer under " + dataRoot.root()));
            List<JsonObject> schema = new ArrayList<>();
            for (DataRoot.Column c : t.columns()) {
                schema.add(Ops.column(c.name(), c.type()));
            }
            input = "read_" + tag;
            ops.add(Ops.read(input, files != null ? files : t.files().stream().map(DataRoot.DataFile::path).toList(),
                    t.format(), schema));
        }
        if (!h.filters().isEmpty()) {
            ops.add(Ops.filter("filter_" + tag, input, String.join(" AND ", h.filters())));
            input = "filter_" + tag;
        }
        return input;
    }
}
