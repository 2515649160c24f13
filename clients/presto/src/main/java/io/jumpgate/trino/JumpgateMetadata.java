package io.jumpgate.trino;

import io.trino.spi.connector.AggregateFunction;
import io.trino.spi.connector.AggregationApplicationResult;
import io.trino.spi.connector.Assignment;
import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.connector.ColumnMetadata;
import io.trino.spi.connector.ConnectorMetadata;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorTableHandle;
import io.trino.spi.connector.ConnectorTableMetadata;
import io.trino.spi.connector.ConnectorTableVersion;
import io.trino.spi.connector.Constraint;
import io.trino.spi.connector.ConstraintApplicationResult;
import io.trino.spi.connector.JoinApplicationResult;
import io.trino.spi.connector.JoinCondition;
import io.trino.spi.connector.JoinStatistics;
import io.trino.spi.connector.JoinType;
import io.trino.spi.connector.LimitApplicationResult;
import io.trino.spi.connector.ProjectionApplicationResult;
import io.trino.spi.connector.SchemaTableName;
import io.trino.spi.connector.SortItem;
import io.trino.spi.connector.TopNApplicationResult;
import io.trino.spi.expression.Call;
import io.trino.spi.expression.ConnectorExpression;
import io.trino.spi.expression.Constant;
import io.trino.spi.expression.Variable;
import io.trino.spi.predicate.Domain;
import io.trino.spi.predicate.TupleDomain;
import io.trino.spi.type.BigintType;
import io.trino.spi.type.DecimalType;
import io.trino.spi.type.DoubleType;
import io.trino.spi.type.IntegerType;
import io.trino.spi.type.Type;

import io.trino.spi.connector.RelationColumnsMetadata;
import io.trino.spi.connector.RelationType;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.Set;
import java.util.function.UnaryOperator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.logging.Logger;

import static io.trino.spi.expression.StandardFunctions.AND_FUNCTION_NAME;
import static io.trino.spi.expression.StandardFunctions.CAST_FUNCTION_NAME;
import static io.trino.spi.expression.StandardFunctions.DIVIDE_FUNCTION_NAME;

/**
 * Lists the data root's datasets ({@link DataRoot}) and takes what Jumpgate can run from the plan:
 * filters, projections, single-step aggregations. Each refusal has a reason, logged and kept in the
 * table handle so that EXPLAIN shows it ({@link JumpgateTableHandle#toString()}).
 */
public final class JumpgateMetadata implements ConnectorMetadata {
    private static final Logger LOG = Logger.getLogger(JumpgateMetadata.class.getName());

    private final JumpgateConfig config;
    private final DataRoot dataRoot;
    private final JobRuns runs;

    public JumpgateMetadata(JumpgateConfig config, DataRoot dataRoot, JobRuns runs) {
        this.config = config;
        this.dataRoot = dataRoot;
        this.runs = runs;
    }

    @Override
    public void cleanupQuery(ConnectorSession session) {
        runs.queryEnded(session.getQueryId());
    }

    // ---- listing ------------------------------------------------------------------------------

    @Override
    public List<String> listSchemaNames(ConnectorSession session) {
        return List.copyOf(dataRoot.schemas().keySet());
    }

    @Override
    public ConnectorTableHandle getTableHandle(ConnectorSession session, SchemaTableName name,
                                               Optional<ConnectorTableVersion> startVersion, Optional<ConnectorTableVersion> endVersion) {
        if (startVersion.isPresent() || endVersion.isPresent()) {
            return null;
        }
        return dataRoot.table(name.getSchemaName(), name.getTableName())
                .map(t -> new JumpgateTableHandle(t.schema(), t.name())).orElse(null);
    }

    DataRoot.Table table(JumpgateTableHandle h) {
        return dataRoot.table(h.schema(), h.table()).orElseThrow(() ->
                new IllegalStateException("table " + h.schemaTableName() + " is no longer under " + dataRoot.root()));
    }

    @Override
    public ConnectorTableMetadata getTableMetadata(ConnectorSession session, ConnectorTableHandle handle) {
        JumpgateTableHandle h = (JumpgateTableHandle) handle;
        List<ColumnMetadata> cols = new ArrayList<>();
        for (JumpgateColumnHandle c : baseColumns(h)) { // a pushed join: both sides' columns
            cols.add(c.metadata());
        }
        return new ConnectorTableMetadata(h.schemaTableName(), cols);
    }

    @Override
    public List<SchemaTableName> listTables(ConnectorSession session, Optional<String> schema) {
        List<SchemaTableName> out = new ArrayList<>();
        dataRoot.schemas().forEach((s, tables) -> {
            if (schema.isEmpty() || schema.get().equals(s)) {
                tables.keySet().forEach(t -> out.add(new SchemaTableName(s, t)));
            }
        });
        return out;
    }

    @Override
    public Iterator<RelationColumnsMetadata> streamRelationColumns(ConnectorSession session, Optional<String> schema,
                                                                   UnaryOperator<Set<SchemaTableName>> relationFilter) {
        Map<SchemaTableName, DataRoot.Table> tables = new LinkedHashMap<>();
        dataRoot.schemas().forEach((s, ts) -> {
            if (schema.isEmpty() || schema.get().equals(s)) {
                ts.forEach((name, t) -> tables.put(new SchemaTableName(s, name), t));
            }
        });
        List<RelationColumnsMetadata> out = new ArrayList<>();
        for (SchemaTableName n : relationFilter.apply(tables.keySet())) {
            List<ColumnMetadata> cols = new ArrayList<>();
            for (DataRoot.Column c : tables.get(n).columns()) {
                cols.add(JumpgateColumnHandle.base(c.name(), Types.trino(c.type())).metadata());
            }
            out.add(RelationColumnsMetadata.forTable(n, cols));
        }
        return out.iterator();
    }

    @Override
    public Map<SchemaTableName, RelationType> getRelationTypes(ConnectorSession session, Optional<String> schema) {
        Map<SchemaTableName, RelationType> out = new LinkedHashMap<>();
        for (SchemaTableName n : listTables(session, schema)) {
            out.put(n, RelationType.TABLE);
        }
        return out;
    }

    @Override
    public Map<String, ColumnHandle> getColumnHandles(ConnectorSession session, ConnectorTableHandle handle) {
        Map<String, ColumnHandle> out = new LinkedHashMap<>();
        for (JumpgateColumnHandle c : baseColumns((JumpgateTableHandle) handle)) { // a pushed join: both sides' columns
            out.put(c.name(), c);
        }
        return out;
    }

    /**
     * The columns a relation outputs, by the names they have in the job: a table's base columns,
     * or the outputs of its pushed aggregation (the handles applyAggregation gave Trino); a pushed
     * join's both sides'.
     */
    private List<JumpgateColumnHandle> baseColumns(JumpgateTableHandle h) {
        List<JumpgateColumnHandle> out = new ArrayList<>();
        for (JumpgateTableHandle b : h.baseTables()) {
            if (b.aggregation().isPresent() && !b.aggregation().get().outputs().isEmpty()) {
                out.addAll(b.aggregation().get().outputs());
                continue;
            }
            for (DataRoot.Column c : table(b).columns()) {
                out.add(JumpgateColumnHandle.base(b.jobName(c.name()), Types.trino(c.type())));
            }
        }
        return out;
    }

    @Override
    public ColumnMetadata getColumnMetadata(ConnectorSession session, ConnectorTableHandle table, ColumnHandle column) {
        return ((JumpgateColumnHandle) column).metadata();
    }

    // ---- pushdown -----------------------------------------------------------------------------

    private void refused(JumpgateTableHandle h, String what, String why) {
        LOG.info("Jumpgate: " + what + " on " + h.schemaTableName() + " stays in Trino: " + why);
    }

    @Override
    public Optional<ConstraintApplicationResult<ConnectorTableHandle>> applyFilter(ConnectorSession session, ConnectorTableHandle handle,
                                                                                 Constraint constraint) {
        JumpgateTableHandle h = (JumpgateTableHandle) handle;
        if (constraint.getSummary().isAll() && isTrue(constraint.getExpression())) {
            return Optional.empty();
        }
        String note = null;
        if (!config.enabled("filter")) {
            note = "filter (" + config.switchedOff("filter") + ")";
        }
        // Above a pushed aggregation the constraint's columns are the aggregation's outputs: the
        // conditions become its HAVING, applied by the job after the aggregation.
        List<String> already = h.aggregation().map(JumpgateTableHandle.PushedAggregation::having).orElse(h.filters());
        if (note != null) {
            if (h.notPushed().contains(note)) {
                return Optional.empty();
            }
            refused(h, "filter", note);
            return Optional.of(new ConstraintApplicationResult<>(h.withNote(note), constraint.getSummary(),
                    constraint.getExpression(), false));
        }
        List<String> pushed = new ArrayList<>();
        List<String> reasons = new ArrayList<>();
        TupleDomain<ColumnHandle> remaining = TupleDomain.all();
        TupleDomain<ColumnHandle> summary = constraint.getSummary();
        if (summary.isNone()) {
            pushed.add("FALSE");
        } else {
            Map<ColumnHandle, Domain> left = new HashMap<>();
            for (Map.Entry<ColumnHandle, Domain> e : summary.getDomains().orElse(Map.of()).entrySet()) {
                try {
                    pushed.add(Sql.domain((JumpgateColumnHandle) e.getKey(), e.getValue()));
                } catch (Sql.Unsupported u) {
                    left.put(e.getKey(), e.getValue());
                    reasons.add(u.getMessage());
                }
            }
            remaining = TupleDomain.withColumnDomains(left);
        }
        List<ConnectorExpression> leftExprs = new ArrayList<>();
        for (ConnectorExpression conjunct : conjuncts(constraint.getExpression())) {
            if (isTrue(conjunct)) {
                continue;
            }
            try {
                pushed.add(Sql.translate(conjunct, constraint.getAssignments()));
            } catch (Sql.Unsupported u) {
                leftExprs.add(conjunct);
                reasons.add(u.getMessage());
            }
        }
        JumpgateTableHandle next = h;
        pushed.removeAll(already); // the same condition offered again
        if (!pushed.isEmpty()) {
            next = h.aggregation().isPresent() ? next.withAggregation(h.aggregation().get().withHaving(pushed)) : next.withFilters(pushed);
        }
        if (!reasons.isEmpty()) {
            String n = "filter parts (" + String.join("; ", reasons) + ")";
            if (!h.notPushed().contains(n)) {
                refused(h, "filter parts", String.join("; ", reasons));
                next = next.withNote(n);
            }
        }
        if (next.equals(h)) {
            return Optional.empty();
        }
        ConnectorExpression rest = leftExprs.isEmpty() ? Constant.TRUE
                : leftExprs.size() == 1 ? leftExprs.get(0) : new Call(io.trino.spi.type.BooleanType.BOOLEAN, AND_FUNCTION_NAME, leftExprs);
        return Optional.of(new ConstraintApplicationResult<>(next, remaining, rest, false));
    }

    private static boolean isTrue(ConnectorExpression e) {
        return e instanceof Constant c && Boolean.TRUE.equals(c.getValue());
    }

    private static List<ConnectorExpression> conjuncts(ConnectorExpression e) {
        if (e instanceof Call c && c.getFunctionName().equals(AND_FUNCTION_NAME)) {
            List<ConnectorExpression> out = new ArrayList<>();
            for (ConnectorExpression a : c.getArguments()) {
                out.addAll(conjuncts(a));
            }
            return out;
        }
        return List.of(e);
    }

    @Override
    public Optional<ProjectionApplicationResult<ConnectorTableHandle>> applyProjection(ConnectorSession session, ConnectorTableHandle handle,
                                                                                     List<ConnectorExpression> projections,
                                                                                     Map<String, ColumnHandle> assignments) {
        JumpgateTableHandle h = (JumpgateTableHandle) handle;
        if (projections.stream().allMatch(p -> p instanceof Variable)) {
            return Optional.empty();
        }
        if (!config.enabled("projection") || h.aggregation().isPresent()) {
            String note = h.aggregation().isPresent() ? "projection above the pushed aggregation"
                    : "projection (" + config.switchedOff("projection") + ")";
            if (h.notPushed().contains(note)) {
                return Optional.empty();
            }
            refused(h, "projection", note);
            return Optional.of(new ProjectionApplicationResult<>(h.withNote(note), projections, assignmentsOf(projections, assignments), false));
        }
        List<ConnectorExpression> out = new ArrayList<>();
        Map<String, Assignment> newAssignments = new LinkedHashMap<>();
        List<String> reasons = new ArrayList<>();
        boolean changed = false;
        for (ConnectorExpression p : projections) {
            if (p instanceof Variable v) {
                out.add(p);
                newAssignments.put(v.getName(), new Assignment(v.getName(), assignments.get(v.getName()), v.getType()));
                continue;
            }
            try {
                if (!Sql.supported(p.getType()) && !(p.getType() instanceof DecimalType)) {
                    throw new Sql.Unsupported("a result of type " + p.getType());
                }
                String expr = Sql.translate(p, assignments);
                String name = "p_" + Integer.toHexString(expr.hashCode() & 0x7fffffff) + "_" + Integer.toHexString(p.getType().hashCode() & 0xfff);
                JumpgateColumnHandle c = new JumpgateColumnHandle(name, p.getType(), expr, true);
                out.add(new Variable(name, p.getType()));
                newAssignments.put(name, new Assignment(name, c, p.getType()));
                changed = true;
            } catch (Sql.Unsupported u) {
                reasons.add(u.getMessage());
                out.add(p);
                for (Variable v : variables(p)) {
                    newAssignments.put(v.getName(), new Assignment(v.getName(), assignments.get(v.getName()), v.getType()));
                }
            }
        }
        JumpgateTableHandle next = h;
        if (!reasons.isEmpty()) {
            String note = "projections (" + String.join("; ", reasons) + ")";
            if (!h.notPushed().contains(note)) {
                refused(h, "projections", String.join("; ", reasons));
                next = next.withNote(note);
                changed = true;
            }
        }
        if (!changed) {
            return Optional.empty();
        }
        return Optional.of(new ProjectionApplicationResult<>(next, out, List.copyOf(newAssignments.values()), false));
    }

    private static List<Assignment> assignmentsOf(List<ConnectorExpression> projections, Map<String, ColumnHandle> assignments) {
        Map<String, Assignment> out = new LinkedHashMap<>();
        for (ConnectorExpression p : projections) {
            for (Variable v : variables(p)) {
                out.put(v.getName(), new Assignment(v.getName(), assignments.get(v.getName()), v.getType()));
            }
        }
        return List.copyOf(out.values());
    }

    private static List<Variable> variables(ConnectorExpression e) {
        if (e instanceof Variable v) {
            return List.of(v);
        }
        List<Variable> out = new ArrayList<>();
        for (ConnectorExpression c : e.getChildren()) {
            out.addAll(variables(c));
        }
        return out;
    }

    @Override
    public Optional<AggregationApplicationResult<ConnectorTableHandle>> applyAggregation(ConnectorSession session, ConnectorTableHandle handle,
                                                                                       List<AggregateFunction> aggregates,
                                                                                       Map<String, ColumnHandle> assignments,
                                                                                       List<List<ColumnHandle>> groupingSets) {
        JumpgateTableHandle h = (JumpgateTableHandle) handle;
        String why = null;
        if (!config.enabled("aggregation")) {
            why = config.switchedOff("aggregation");
        } else if (h.aggregation().isPresent()) {
            why = "an aggregation over a pushed aggregation";
        } else if (groupingSets.size() != 1) {
            why = "grouping sets";
        }
        List<JumpgateTableHandle.Item> items = new ArrayList<>();
        List<ConnectorExpression> projections = new ArrayList<>();
        List<Assignment> newAssignments = new ArrayList<>();
        for (int i = 0; why == null && i < aggregates.size(); i++) {
            AggregateFunction f = aggregates.get(i);
            try {
                String name = "a" + i;
                String[] fnExpr = aggregate(f, assignments);
                if (fnExpr[0].equals("avg") && f.getOutputType() instanceof DecimalType out) {
                    projections.add(decimalAverage(name, fnExpr[1], out, items, newAssignments));
                    continue;
                }
                items.add(new JumpgateTableHandle.Item(name, fnExpr[0], fnExpr[1]));
                JumpgateColumnHandle c = new JumpgateColumnHandle(name, f.getOutputType(), Sql.ident(name), true);
                projections.add(new Variable(name, f.getOutputType()));
                newAssignments.add(new Assignment(name, c, f.getOutputType()));
            } catch (Sql.Unsupported u) {
                why = u.getMessage();
            }
        }
        List<JumpgateTableHandle.Item> groupBy = new ArrayList<>();
        Map<ColumnHandle, ColumnHandle> groupMapping = new HashMap<>();
        if (why == null) {
            List<ColumnHandle> keys = groupingSets.get(0);
            for (int i = 0; i < keys.size(); i++) {
                JumpgateColumnHandle k = (JumpgateColumnHandle) keys.get(i);
                if (!Sql.supported(k.type())) {
                    why = "grouping by " + k.name() + " of type " + k.type();
                    break;
                }
                String name = "g" + i;
                groupBy.add(new JumpgateTableHandle.Item(name, null, k.synthetic() ? "(" + k.expr() + ")" : k.expr()));
                JumpgateColumnHandle g = new JumpgateColumnHandle(name, k.type(), Sql.ident(name), true);
                groupMapping.put(k, g);
                newAssignments.add(new Assignment(name, g, k.type())); // Trino finds the new group columns here
            }
        }
        if (why != null) {
            String note = "aggregation (" + why + ")";
            if (!h.notPushed().contains(note)) {
                refused(h, "aggregation", why);
            }
            JumpgateTableHandle.refusedAggregation(h, why); // EXPLAIN prints it with the scan's handle
            return Optional.empty();
        }
        List<JumpgateColumnHandle> outputs = new ArrayList<>();
        newAssignments.stream().filter(a -> groupMapping.containsValue(a.getColumn())).forEach(a -> outputs.add((JumpgateColumnHandle) a.getColumn()));
        newAssignments.stream().filter(a -> !groupMapping.containsValue(a.getColumn())).forEach(a -> outputs.add((JumpgateColumnHandle) a.getColumn()));
        JumpgateTableHandle next = h.withAggregation(new JumpgateTableHandle.PushedAggregation(groupBy, items, List.of(), outputs));
        return Optional.of(new AggregationApplicationResult<>(next, projections, newAssignments, groupMapping, false));
    }

    /**
     * Trino's {@code avg} of a decimal is a decimal of the input's scale, rounded half up; the
     * contract's is not. So Jumpgate computes its {@code sum} (kept exact: Trino's sum type,
     * decimal(38, s)) and {@code count}, and Trino divides them as its own average does: {@code
     * CAST(sum / CAST(count AS decimal(19,0)) AS decimal(p,s))}. Decimal division in Trino rounds
     * half up to the larger scale, here s, so the quotient is the same number; no rows (count 0,
     * sum NULL) gives NULL, as avg does.
     */
    private static ConnectorExpression decimalAverage(String name, String expr, DecimalType out, List<JumpgateTableHandle.Item> items,
                                                      List<Assignment> newAssignments) {
        DecimalType sumType = DecimalType.createDecimalType(38, out.getScale());
        DecimalType countType = DecimalType.createDecimalType(19, 0);
        String sum = name + "_sum";
        String count = name + "_count";
        items.add(new JumpgateTableHandle.Item(sum, "sum", wideSumInput(expr, out)));
        items.add(new JumpgateTableHandle.Item(count, "count", expr));
        newAssignments.add(new Assignment(sum, new JumpgateColumnHandle(sum, sumType, Sql.ident(sum), true), sumType));
        newAssignments.add(new Assignment(count, new JumpgateColumnHandle(count, BigintType.BIGINT, Sql.ident(count), true), BigintType.BIGINT));
        ConnectorExpression quotient = new Call(sumType, DIVIDE_FUNCTION_NAME, List.of(new Variable(sum, sumType),
                new Call(countType, CAST_FUNCTION_NAME, List.of(new Variable(count, BigintType.BIGINT)))));
        return out.equals(sumType) ? quotient : new Call(out, CAST_FUNCTION_NAME, List.of(quotient));
    }

    /** {@code expr} (of decimal type {@code in}) cast to decimal(38, its scale): its sum is decimal(38, s). */
    private static String wideSumInput(String expr, DecimalType in) {
        return "CAST(" + expr + " AS decimal(38," + in.getScale() + "))";
    }

    /** {fn, expr} of the contract for one Trino aggregate whose result the contract computes the same way. */
    private static String[] aggregate(AggregateFunction f, Map<String, ColumnHandle> assignments) throws Sql.Unsupported {
        if (f.isDistinct() || f.getFilter().isPresent() || !f.getSortItems().isEmpty()) {
            throw new Sql.Unsupported(f.getFunctionName() + " with DISTINCT, FILTER or ORDER BY");
        }
        String fn = f.getFunctionName();
        List<ConnectorExpression> args = f.getArguments();
        if (fn.equals("count") && args.isEmpty()) {
            return new String[] {"count_star", null};
        }
        if (args.size() != 1) {
            throw new Sql.Unsupported(fn + " with " + args.size() + " arguments");
        }
        Type in = args.get(0).getType();
        // A long decimal here is a pushed product or sum that Trino typed wide: Jumpgate computes it
        // in at most 18 digits and fails the job if a value does not fit, never a wrong answer (its
        // sum, below, adds in 38 digits as Trino's does).
        if (!Sql.supported(in) && !(in instanceof DecimalType)) {
            throw new Sql.Unsupported(fn + " of type " + in);
        }
        String expr = Sql.translate(args.get(0), assignments);
        switch (fn) {
            case "count", "min", "max":
                return new String[] {fn, expr};
            case "sum":
                if (in instanceof DecimalType d && f.getOutputType() instanceof DecimalType out && !out.isShort()) {
                    // Trino sums a decimal in decimal(38,s): so does Jumpgate, over the input cast to
                    // that wide decimal (docs/contract.md, "Wide decimals"), overflowing where Trino does
                    return new String[] {fn, wideSumInput(expr, d)};
                }
                if (in instanceof IntegerType || in instanceof BigintType || in instanceof DoubleType || in instanceof DecimalType) {
                    return new String[] {fn, expr};
                }
                break;
            case "avg":
                // Of a decimal: computed from sum and count (decimalAverage), whose rounding is Trino's.
                if (in instanceof IntegerType || in instanceof BigintType || in instanceof DoubleType || in instanceof DecimalType) {
                    return new String[] {fn, expr};
                }
                break;
            default:
                break;
        }
        throw new Sql.Unsupported(fn + "(" + in + ") has no contract aggregate with Trino's result");
    }

    @Override
    public Optional<JoinApplicationResult<ConnectorTableHandle>> applyJoin(ConnectorSession session, JoinType joinType,
                                                                         ConnectorTableHandle left, ConnectorTableHandle right,
                                                                         List<JoinCondition> joinConditions,
                                                                         Map<String, ColumnHandle> leftAssignments,
                                                                         Map<String, ColumnHandle> rightAssignments,
                                                                         JoinStatistics statistics) {
        JumpgateTableHandle l = (JumpgateTableHandle) left;
        JumpgateTableHandle r = (JumpgateTableHandle) right;
        String why = null;
        String type = switch (joinType) {
            case INNER -> "inner";
            case LEFT_OUTER, RIGHT_OUTER -> "left_outer"; // a right outer join is a left outer join the other way round
            default -> null;
        };
        if (!config.enabled("join")) {
            why = config.switchedOff("join");
        } else if (type == null) {
            why = joinType + " joins (the contract has inner, left semi/anti and left outer joins)";
        } else if (l.aggregation().isPresent() && l.join().isPresent() || r.aggregation().isPresent() && r.join().isPresent()) {
            why = "a join over an aggregation pushed over a join";
        } else if (joinConditions.isEmpty()) {
            why = "a join without equality keys";
        }
        List<String> leftKeys = new ArrayList<>();
        List<String> rightKeys = new ArrayList<>();
        for (int i = 0; why == null && i < joinConditions.size(); i++) {
            JoinCondition c = joinConditions.get(i);
            if (c.getOperator() != JoinCondition.Operator.EQUAL) {
                why = "a join condition " + c.getOperator();
                break;
            }
            if (!c.getLeftExpression().getType().equals(c.getRightExpression().getType()) || !Sql.supported(c.getLeftExpression().getType())) {
                why = "join keys of types " + c.getLeftExpression().getType() + " and " + c.getRightExpression().getType();
                break;
            }
            try {
                leftKeys.add(Sql.translate(c.getLeftExpression(), leftAssignments));
                rightKeys.add(Sql.translate(c.getRightExpression(), rightAssignments));
            } catch (Sql.Unsupported u) {
                why = "join key: " + u.getMessage();
            }
        }
        // The join's output is the probe's columns then the build's, by name: names must not clash.
        // When they do (a self-join), a side that is a table renames its clashing columns.
        Map<ColumnHandle, ColumnHandle> leftMap = new HashMap<>();
        Map<ColumnHandle, ColumnHandle> rightMap = new HashMap<>();
        if (why == null && outputNames(r).stream().anyMatch(new java.util.HashSet<>(outputNames(l))::contains)) {
            Optional<Renamed> renamed = renamedApart(session, r, rightAssignments, l);
            boolean onRight = renamed.isPresent();
            if (!onRight) {
                renamed = renamedApart(session, l, leftAssignments, r);
            }
            if (renamed.isEmpty()) {
                why = "both sides have columns of the same names, and neither is a table that can rename them";
            } else {
                Renamed side = renamed.get();
                if (onRight) {
                    r = side.handle();
                    rightMap.putAll(side.columns());
                    rightKeys.replaceAll(k -> Sql.renamed(k, side.names()));
                } else {
                    l = side.handle();
                    leftMap.putAll(side.columns());
                    leftKeys.replaceAll(k -> Sql.renamed(k, side.names()));
                }
            }
        }
        if (why != null) {
            LOG.info("Jumpgate: join of " + l.schemaTableName() + " and " + r.schemaTableName() + " stays in Trino: " + why);
            // EXPLAIN prints it with both scans' handles (kept as they are: nothing was pushed)
            JumpgateTableHandle.refusedJoin((JumpgateTableHandle) left, "join with " + ((JumpgateTableHandle) right).schemaTableName() + " (" + why + ")");
            JumpgateTableHandle.refusedJoin((JumpgateTableHandle) right, "join with " + ((JumpgateTableHandle) left).schemaTableName() + " (" + why + ")");
            return Optional.empty();
        }
        // The contract's left side is the probe side, and the side a left outer join keeps. Trino's
        // right side would be the build side; an inner join builds the smaller one instead.
        boolean swap = joinType == JoinType.RIGHT_OUTER || type.equals("inner")
                && SizeEstimate.of(l, this::table).estimate() < SizeEstimate.of(r, this::table).estimate();
        JumpgateTableHandle.PushedJoin pushed = swap
                ? new JumpgateTableHandle.PushedJoin(r, l, type, rightKeys, leftKeys)
                : new JumpgateTableHandle.PushedJoin(l, r, type, leftKeys, rightKeys);
        JumpgateTableHandle joined = JumpgateTableHandle.ofJoin(pushed);
        // Every other column of each side keeps its handle: names are unique across the join's output.
        getColumnHandles(session, left).values().forEach(c -> leftMap.putIfAbsent(c, c));
        leftAssignments.values().forEach(c -> leftMap.putIfAbsent(c, c));
        getColumnHandles(session, right).values().forEach(c -> rightMap.putIfAbsent(c, c));
        rightAssignments.values().forEach(c -> rightMap.putIfAbsent(c, c));
        return Optional.of(new JoinApplicationResult<>(joined, leftMap, rightMap, false));
    }

    /** The names of the base columns a relation outputs. */
    private List<String> columnNames(JumpgateTableHandle h) {
        return baseColumns(h).stream().map(JumpgateColumnHandle::name).toList();
    }

    /** The names of the columns a relation outputs: a pushed aggregation's, or its base columns'. */
    private List<String> outputNames(JumpgateTableHandle h) {
        if (h.join().isPresent()) {
            List<String> out = new ArrayList<>(outputNames(h.join().get().left()));
            out.addAll(outputNames(h.join().get().right()));
            return out;
        }
        if (h.aggregation().isPresent()) {
            List<String> out = new ArrayList<>();
            h.aggregation().get().groupBy().forEach(i -> out.add(i.name()));
            h.aggregation().get().aggregates().forEach(i -> out.add(i.name()));
            return out;
        }
        return columnNames(h);
    }

    /**
     * {@code side} (a base table) with its columns that {@code other} also has renamed
     * ({@code n_name} → {@code n_name_2}, the first number free on both sides), and the map of
     * its column handles to the renamed ones. Empty when {@code side} is itself a join, or when
     * a column Trino assigned is a pushed projection: renaming inside those is not done.
     */
    private Optional<Renamed> renamedApart(ConnectorSession session, JumpgateTableHandle side, Map<String, ColumnHandle> assignments,
                                           JumpgateTableHandle other) {
        if (side.join().isPresent() || side.aggregation().isPresent()
                || assignments.values().stream().anyMatch(c -> ((JumpgateColumnHandle) c).synthetic())) {
            return Optional.empty();
        }
        Set<String> taken = new java.util.HashSet<>(outputNames(other));
        List<String> own = columnNames(side);
        taken.addAll(own);
        Map<String, String> renames = new LinkedHashMap<>();
        for (String n : own) {
            if (outputNames(other).contains(n)) {
                int k = 2;
                while (taken.contains(n + "_" + k)) {
                    k++;
                }
                renames.put(n, n + "_" + k);
                taken.add(n + "_" + k);
            }
        }
        Map<ColumnHandle, ColumnHandle> handles = new HashMap<>();
        for (ColumnHandle h : getColumnHandles(session, side).values()) {
            JumpgateColumnHandle c = (JumpgateColumnHandle) h;
            handles.put(c, JumpgateColumnHandle.base(renames.getOrDefault(c.name(), c.name()), c.type()));
        }
        return Optional.of(new Renamed(side.withRenames(renames), handles, renames));
    }

    private record Renamed(JumpgateTableHandle handle, Map<ColumnHandle, ColumnHandle> columns, Map<String, String> names) {}

    @Override
    public Optional<LimitApplicationResult<ConnectorTableHandle>> applyLimit(ConnectorSession session, ConnectorTableHandle handle, long limit) {
        JumpgateTableHandle h = (JumpgateTableHandle) handle;
        String note = "limit (the contract has no limit operation: Trino stops reading after " + limit + " rows)";
        if (h.notPushed().stream().anyMatch(n -> n.startsWith("limit"))) {
            return Optional.empty();
        }
        refused(h, "limit", note);
        return Optional.of(new LimitApplicationResult<>(h.withNote(note), false, false));
    }

    @Override
    public Optional<TopNApplicationResult<ConnectorTableHandle>> applyTopN(ConnectorSession session, ConnectorTableHandle handle, long topNCount,
                                                                         List<SortItem> sortItems, Map<String, ColumnHandle> assignments) {
        JumpgateTableHandle h = (JumpgateTableHandle) handle;
        String note = "topN (the contract has no sort operation)";
        if (h.notPushed().contains(note)) {
            return Optional.empty();
        }
        refused(h, "topN", note);
        return Optional.of(new TopNApplicationResult<>(h.withNote(note), false, false));
    }
}
