package io.jumpgate.trino;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.trino.spi.connector.ConnectorTableHandle;
import io.trino.spi.connector.SchemaTableName;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * A table, and what of the query above it was pushed into Jumpgate: filter conditions over the base
 * columns (ANDed), then optionally one complete (single-step) aggregation. Projections need no
 * state here: they are synthetic column handles. Conditions over the aggregation's output (HAVING)
 * are kept with the aggregation. {@code notPushed} keeps why operators stayed in
 * Trino, so EXPLAIN shows it (the handle's toString is the scan's "table" in the plan).
 */
public record JumpgateTableHandle(
        @JsonProperty("schema") String schema,
        @JsonProperty("table") String table,
        @JsonProperty("filters") List<String> filters,
        @JsonProperty("aggregation") Optional<PushedAggregation> aggregation,
        @JsonProperty("notPushed") List<String> notPushed,
        @JsonProperty("join") Optional<PushedJoin> join,
        @JsonProperty("renames") Map<String, String> renames) implements ConnectorTableHandle {

    @JsonCreator
    public JumpgateTableHandle {
        filters = List.copyOf(filters);
        notPushed = List.copyOf(notPushed);
        renames = renames == null ? Map.of() : Collections.unmodifiableMap(new TreeMap<>(renames));
    }

    public JumpgateTableHandle(String schema, String table, List<String> filters, Optional<PushedAggregation> aggregation,
                               List<String> notPushed, Optional<PushedJoin> join) {
        this(schema, table, filters, aggregation, notPushed, join, Map.of());
    }

    public JumpgateTableHandle(String schema, String table) {
        this(schema, table, List.of(), Optional.empty(), List.of(), Optional.empty());
    }

    /**
     * This base table with some of its columns under other names in the job ({@code renames}: base
     * name → name), so that a join with a table of the same columns (a self-join, TPC-H Q7's and
     * Q8's two nations) has unique names: the contract's join outputs both sides' columns by name.
     * The scan applies its own filters to the base names, then renames in its column projection.
     */
    public JumpgateTableHandle withRenames(Map<String, String> more) {
        Map<String, String> r = new TreeMap<>(renames);
        r.putAll(more);
        return new JumpgateTableHandle(schema, table, filters, aggregation, notPushed, join, r);
    }

    /** The name a base column of this table has in the job. */
    public String jobName(String baseColumn) {
        return renames.getOrDefault(baseColumn, baseColumn);
    }

    /** A join of two relations pushed into Jumpgate: probe = left, build = right (contract §1 join). */
    public record PushedJoin(
            @JsonProperty("left") JumpgateTableHandle left,
            @JsonProperty("right") JumpgateTableHandle right,
            @JsonProperty("type") String type,
            @JsonProperty("leftKeys") List<String> leftKeys,
            @JsonProperty("rightKeys") List<String> rightKeys) {
        @JsonCreator
        public PushedJoin {
            leftKeys = List.copyOf(leftKeys);
            rightKeys = List.copyOf(rightKeys);
        }
    }

    public static JumpgateTableHandle ofJoin(PushedJoin j) {
        List<String> notes = new ArrayList<>(j.left().notPushed());
        j.right().notPushed().stream().filter(n -> !notes.contains(n)).forEach(notes::add);
        return new JumpgateTableHandle(j.left().schema(), "(" + j.left().table() + " JOIN " + j.right().table() + ")",
                List.of(), Optional.empty(), notes, Optional.of(j));
    }

    /** The base tables this handle reads, in order. */
    public List<JumpgateTableHandle> baseTables() {
        if (join.isEmpty()) {
            return List.of(this);
        }
        List<JumpgateTableHandle> out = new ArrayList<>(join.get().left().baseTables());
        out.addAll(join.get().right().baseTables());
        return out;
    }

    /** One grouping column or aggregate of a pushed aggregation. */
    public record Item(@JsonProperty("name") String name, @JsonProperty("fn") String fn, @JsonProperty("expr") String expr) {
        @JsonCreator
        public Item {}
    }

    /**
     * A complete aggregation, and the conditions over its output (HAVING, ANDed) pushed with it: they
     * name the aggregation's output columns. {@code outputs} are the column handles Trino was given
     * for its output (group keys, then aggregates): the relation's columns, as a join of it with
     * another relation must list them.
     */
    public record PushedAggregation(@JsonProperty("groupBy") List<Item> groupBy, @JsonProperty("aggregates") List<Item> aggregates,
                                    @JsonProperty("having") List<String> having,
                                    @JsonProperty("outputs") List<JumpgateColumnHandle> outputs) {
        @JsonCreator
        public PushedAggregation {
            groupBy = List.copyOf(groupBy);
            aggregates = List.copyOf(aggregates);
            having = having == null ? List.of() : List.copyOf(having);
            outputs = outputs == null ? List.of() : List.copyOf(outputs);
        }

        public PushedAggregation(List<Item> groupBy, List<Item> aggregates, List<String> having) {
            this(groupBy, aggregates, having, List.of());
        }

        public PushedAggregation withHaving(List<String> more) {
            List<String> h = new ArrayList<>(having);
            h.addAll(more);
            return new PushedAggregation(groupBy, aggregates, h, outputs);
        }
    }

    /**
     * Why an aggregation Trino offered over a handle was refused. Refusing leaves the handle as it
     * was (applyAggregation returns nothing), so the reason is kept here, by handle, for EXPLAIN to
     * print with it (the coordinator plans and explains in this JVM).
     */
    private static final Map<JumpgateTableHandle, String> REFUSED_AGGREGATIONS = refusals();

    static void refusedAggregation(JumpgateTableHandle h, String why) {
        REFUSED_AGGREGATIONS.put(h, why);
    }

    /** Why a join of this relation with another that Trino offered was refused; kept the same way. */
    private static final Map<JumpgateTableHandle, String> REFUSED_JOINS = refusals();

    /** A memory of refusals by handle, bounded: the least recently used go first. */
    private static Map<JumpgateTableHandle, String> refusals() {
        return Collections.synchronizedMap(new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<JumpgateTableHandle, String> eldest) {
                return size() > 10_000;
            }
        });
    }

    static void refusedJoin(JumpgateTableHandle h, String why) {
        REFUSED_JOINS.put(h, why);
    }

    public SchemaTableName schemaTableName() {
        return new SchemaTableName(schema, table);
    }

    public JumpgateTableHandle withFilters(List<String> more) {
        List<String> f = new ArrayList<>(filters);
        f.addAll(more);
        return new JumpgateTableHandle(schema, table, f, aggregation, notPushed, join, renames);
    }

    public JumpgateTableHandle withAggregation(PushedAggregation a) {
        return new JumpgateTableHandle(schema, table, filters, Optional.of(a), notPushed, join, renames);
    }

    public JumpgateTableHandle withNote(String note) {
        if (notPushed.contains(note)) {
            return this;
        }
        List<String> n = new ArrayList<>(notPushed);
        n.add(note);
        return new JumpgateTableHandle(schema, table, filters, aggregation, n, join, renames);
    }

    private String describe() {
        String s = toString();
        int notes = s.indexOf(" not pushed=");
        return notes < 0 ? s : s.substring(0, notes);
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder();
        if (join.isPresent()) {
            PushedJoin j = join.get();
            b.append("pushed join=[").append(j.type()).append(" (").append(j.left().describe()).append(") WITH (")
                    .append(j.right().describe()).append(") ON ");
            for (int i = 0; i < j.leftKeys().size(); i++) {
                b.append(i == 0 ? "" : " AND ").append(j.leftKeys().get(i)).append(" = ").append(j.rightKeys().get(i));
            }
            b.append(']');
        } else {
            b.append(schema).append('.').append(table);
        }
        if (!renames.isEmpty()) {
            b.append(" renamed=").append(renames.entrySet().stream().map(e -> e.getKey() + " AS " + e.getValue()).toList());
        }
        if (!filters.isEmpty()) {
            b.append(" pushed filter=[").append(String.join(" AND ", filters)).append(']');
        }
        aggregation.ifPresent(a -> {
            b.append(" pushed aggregation=[group by ");
            b.append(a.groupBy().stream().map(i -> i.name() + ":=" + i.expr()).toList());
            b.append(", ");
            b.append(a.aggregates().stream().map(i -> i.name() + ":=" + i.fn() + "(" + (i.expr() == null ? "*" : i.expr()) + ")").toList());
            if (!a.having().isEmpty()) {
                b.append(", having ").append(String.join(" AND ", a.having()));
            }
            b.append(']');
        });
        List<String> notes = notPushed;
        String aggregationRefused = REFUSED_AGGREGATIONS.get(this);
        String joinRefused = REFUSED_JOINS.get(this);
        if (aggregationRefused != null || joinRefused != null) {
            notes = new ArrayList<>(notPushed);
            if (aggregationRefused != null) {
                notes.add("aggregation (" + aggregationRefused + ")");
            }
            if (joinRefused != null) {
                notes.add(joinRefused);
            }
        }
        if (!notes.isEmpty()) {
            b.append(" not pushed=").append(notes);
        }
        return b.toString();
    }
}
