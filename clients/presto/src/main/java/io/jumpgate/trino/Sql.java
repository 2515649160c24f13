package io.jumpgate.trino;

import io.airlift.slice.Slice;
import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.expression.Call;
import io.trino.spi.expression.ConnectorExpression;
import io.trino.spi.expression.Constant;
import io.trino.spi.expression.FunctionName;
import io.trino.spi.expression.Variable;
import io.trino.spi.predicate.Domain;
import io.trino.spi.predicate.Range;
import io.trino.spi.type.BigintType;
import io.trino.spi.type.BooleanType;
import io.trino.spi.type.DateType;
import io.trino.spi.type.DecimalType;
import io.trino.spi.type.DoubleType;
import io.trino.spi.type.Int128;
import io.trino.spi.type.IntegerType;
import io.trino.spi.type.Type;
import io.trino.spi.type.VarcharType;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static io.trino.spi.expression.StandardFunctions.*;

/**
 * Trino expressions and domains → the contract's expression syntax (contract §1 "Expressions").
 * Only what means the same on both sides is translated; anything else raises {@link Unsupported}
 * with the reason, and stays in Trino. Integer division, decimal division and rounding casts are
 * left out on purpose: the contract's {@code /} yields float64 where Trino keeps integers or
 * decimals.
 */
public final class Sql {
    private Sql() {}

    /** Why an expression cannot be pushed. */
    public static final class Unsupported extends Exception {
        public Unsupported(String why) {
            super(why, null, false, false);
        }
    }

    private static final Map<FunctionName, String> COMPARISONS = Map.of(
            EQUAL_OPERATOR_FUNCTION_NAME, "=", NOT_EQUAL_OPERATOR_FUNCTION_NAME, "<>",
            LESS_THAN_OPERATOR_FUNCTION_NAME, "<", LESS_THAN_OR_EQUAL_OPERATOR_FUNCTION_NAME, "<=",
            GREATER_THAN_OPERATOR_FUNCTION_NAME, ">", GREATER_THAN_OR_EQUAL_OPERATOR_FUNCTION_NAME, ">=");
    private static final Map<FunctionName, String> ARITHMETIC = Map.of(
            ADD_FUNCTION_NAME, "+", SUBTRACT_FUNCTION_NAME, "-", MULTIPLY_FUNCTION_NAME, "*",
            DIVIDE_FUNCTION_NAME, "/", MODULUS_FUNCTION_NAME, "%");
    private static final Set<String> STRING_FUNCTIONS = Set.of("lower", "upper");
    private static final Set<String> DATE_PARTS = Set.of("year", "month", "day");

    public static String ident(String name) {
        return "\"" + name.replace("\"", "\"\"") + "\"";
    }

    /**
     * The quoted identifiers of a contract expression ({@code "name"}, {@code ""} inside for a
     * quote), skipping string literals ({@code 'text'}). Every column reference the connector writes
     * is quoted ({@link #ident}), so these are all the columns it reads.
     */
    public static Set<String> identifiers(String expr) {
        Set<String> out = new java.util.HashSet<>();
        if (expr != null) {
            rewriteIdentifiers(expr, name -> {
                out.add(name);
                return name;
            });
        }
        return out;
    }

    /** {@code expr} with the columns named in {@code names} (old → new) renamed; string literals untouched. */
    public static String renamed(String expr, Map<String, String> names) {
        return expr == null || names.isEmpty() ? expr : rewriteIdentifiers(expr, name -> names.getOrDefault(name, name));
    }

    private static String rewriteIdentifiers(String expr, java.util.function.UnaryOperator<String> f) {
        StringBuilder out = new StringBuilder(expr.length());
        int i = 0;
        int n = expr.length();
        while (i < n) {
            char c = expr.charAt(i);
            if (c != '\'' && c != '"') {
                out.append(c);
                i++;
                continue;
            }
            StringBuilder b = new StringBuilder();
            int k = i + 1;
            while (k < n) {
                if (expr.charAt(k) == c) {
                    if (k + 1 < n && expr.charAt(k + 1) == c) {
                        b.append(c);
                        k += 2;
                        continue;
                    }
                    break;
                }
                b.append(expr.charAt(k++));
            }
            if (c == '"') {
                out.append(ident(f.apply(b.toString())));
            } else {
                out.append(expr, i, Math.min(k + 1, n));
            }
            i = k + 1;
        }
        return out.toString();
    }

    /** Types whose values and comparisons are the same in Trino and in the contract. */
    public static boolean supported(Type t) {
        return t instanceof BooleanType || t instanceof IntegerType || t instanceof BigintType || t instanceof DoubleType
                || t instanceof DateType || (t instanceof VarcharType) || (t instanceof DecimalType d && d.isShort());
    }

    /** Like {@link #supported}, and long decimals as results of arithmetic (Trino widens them; the
     *  contract keeps at most 18 digits and fails the job when a value does not fit). */
    private static boolean supportedResult(Type t) {
        return supported(t) || t instanceof DecimalType;
    }

    public static String translate(ConnectorExpression e, Map<String, ColumnHandle> assignments) throws Unsupported {
        if (e instanceof Variable v) {
            ColumnHandle h = assignments.get(v.getName());
            if (!(h instanceof JumpgateColumnHandle c)) {
                throw new Unsupported("unknown column " + v.getName());
            }
            return c.synthetic() ? "(" + c.expr() + ")" : c.expr();
        }
        if (e instanceof Constant c) {
            return literal(c.getType(), c.getValue());
        }
        if (!(e instanceof Call call)) {
            throw new Unsupported("expression " + e + " (" + e.getClass().getSimpleName() + ")");
        }
        if (!supportedResult(call.getType())) {
            throw new Unsupported(call.getFunctionName().getName() + " of type " + call.getType() + " (no contract type)");
        }
        FunctionName fn = call.getFunctionName();
        List<ConnectorExpression> args = call.getArguments();
        String op = COMPARISONS.get(fn);
        if (op != null) {
            requireSupported(args);
            return "(" + translate(args.get(0), assignments) + " " + op + " " + translate(args.get(1), assignments) + ")";
        }
        op = ARITHMETIC.get(fn);
        if (op != null) {
            if (fn.equals(DIVIDE_FUNCTION_NAME) && !(call.getType() instanceof DoubleType)) {
                throw new Unsupported("division of " + call.getType() + " (the contract's / yields float64)");
            }
            if (fn.equals(MODULUS_FUNCTION_NAME) && !(call.getType() instanceof BigintType || call.getType() instanceof IntegerType)) {
                throw new Unsupported("% of " + call.getType());
            }
            return "(" + translate(args.get(0), assignments) + " " + op + " " + translate(args.get(1), assignments) + ")";
        }
        if (fn.equals(AND_FUNCTION_NAME) || fn.equals(OR_FUNCTION_NAME)) {
            List<String> parts = new ArrayList<>();
            for (ConnectorExpression a : args) {
                parts.add(translate(a, assignments));
            }
            return "(" + String.join(fn.equals(AND_FUNCTION_NAME) ? " AND " : " OR ", parts) + ")";
        }
        if (fn.equals(NOT_FUNCTION_NAME)) {
            return "(NOT " + translate(args.get(0), assignments) + ")";
        }
        if (fn.equals(IS_NULL_FUNCTION_NAME)) {
            return "(" + translate(args.get(0), assignments) + " IS NULL)";
        }
        if (fn.equals(NEGATE_FUNCTION_NAME)) {
            return "(-" + translate(args.get(0), assignments) + ")";
        }
        if (fn.equals(LIKE_FUNCTION_NAME)) {
            if (args.size() != 2 || !(args.get(1) instanceof Constant p) || !(p.getValue() instanceof Slice)) {
                throw new Unsupported("LIKE with an escape or a pattern that is not a constant");
            }
            requireSupported(args.subList(0, 1));
            return "(" + translate(args.get(0), assignments) + " LIKE " + literal(p.getType(), p.getValue()) + ")";
        }
        if (fn.equals(IN_PREDICATE_FUNCTION_NAME)) {
            if (!(args.get(1) instanceof Call list) || !list.getFunctionName().equals(ARRAY_CONSTRUCTOR_FUNCTION_NAME)) {
                throw new Unsupported("IN over something other than a list");
            }
            requireSupported(args.subList(0, 1));
            List<String> items = new ArrayList<>();
            for (ConnectorExpression a : list.getArguments()) {
                items.add(translate(a, assignments));
            }
            return "(" + translate(args.get(0), assignments) + " IN (" + String.join(", ", items) + "))";
        }
        if (fn.equals(CAST_FUNCTION_NAME)) {
            return cast(args.get(0), call.getType(), assignments);
        }
        if (fn.getCatalogSchema().isEmpty()) {
            String name = fn.getName();
            if (STRING_FUNCTIONS.contains(name) && args.size() == 1) {
                return name + "(" + translate(args.get(0), assignments) + ")";
            }
            if (DATE_PARTS.contains(name) && args.size() == 1 && args.get(0).getType() instanceof DateType) {
                return name + "(" + translate(args.get(0), assignments) + ")";
            }
            if ((name.equals("substr") || name.equals("substring")) && (args.size() == 2 || args.size() == 3)) {
                List<String> a = new ArrayList<>();
                for (ConnectorExpression x : args) {
                    a.add(translate(x, assignments));
                }
                return "substr(" + String.join(", ", a) + ")";
            }
        }
        throw new Unsupported("function " + fn.getName() + " has no contract equivalent");
    }

    private static void requireSupported(List<ConnectorExpression> args) throws Unsupported {
        for (ConnectorExpression a : args) {
            if (!supported(a.getType())) {
                throw new Unsupported("operand of type " + a.getType());
            }
        }
    }

    private static String cast(ConnectorExpression arg, Type to, Map<String, ColumnHandle> assignments) throws Unsupported {
        Type from = arg.getType();
        String inner = translate(arg, assignments);
        if (from.equals(to) || (from instanceof VarcharType && to instanceof VarcharType vt && vt.isUnbounded())) {
            return inner;
        }
        boolean integral = from instanceof IntegerType || from instanceof BigintType;
        if (integral && to instanceof BigintType) {
            return "CAST(" + inner + " AS int64)";
        }
        if ((integral || from instanceof DecimalType) && to instanceof DoubleType) {
            return "CAST(" + inner + " AS float64)";
        }
        if (integral && to instanceof DecimalType d && d.getScale() == 0 && d.isShort()) {
            return inner; // an integer meets a decimal as a decimal of scale 0
        }
        throw new Unsupported("CAST from " + from + " to " + to);
    }

    public static String literal(Type type, Object value) throws Unsupported {
        if (value == null) {
            return "NULL";
        }
        if (type instanceof BooleanType) {
            return (Boolean) value ? "TRUE" : "FALSE";
        }
        if (type instanceof BigintType || type instanceof IntegerType) {
            return Long.toString((Long) value);
        }
        if (type instanceof DoubleType) {
            double d = (Double) value;
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                throw new Unsupported("the double " + d);
            }
            String s = BigDecimal.valueOf(d).toPlainString();
            return s.contains(".") ? s : s + ".0";
        }
        if (type instanceof DecimalType dt && dt.isShort()) {
            return BigDecimal.valueOf((Long) value, dt.getScale()).toPlainString();
        }
        if (type instanceof DecimalType dt && value instanceof Int128 v) {
            // A long decimal column is an aggregate or a product Trino typed wide (its values hold
            // at most 18 digits in Jumpgate); a constant beyond that cannot be written in the contract.
            BigDecimal d = new BigDecimal(v.toBigInteger(), dt.getScale());
            if (d.precision() > 18) {
                throw new Unsupported("the decimal constant " + d.toPlainString() + " (more than 18 digits)");
            }
            return d.toPlainString();
        }
        if (type instanceof DateType) {
            return "DATE '" + LocalDate.ofEpochDay((Long) value) + "'";
        }
        if (type instanceof VarcharType) {
            return "'" + ((Slice) value).toStringUtf8().replace("'", "''") + "'";
        }
        throw new Unsupported("a constant of type " + type);
    }

    /** A domain of one column as a condition, e.g. {@code ("x" >= 3 AND "x" < 7) OR "x" IN (9, 11)}. */
    public static String domain(JumpgateColumnHandle column, Domain d) throws Unsupported {
        String x = column.synthetic() ? "(" + column.expr() + ")" : column.expr();
        if (d.isNone()) {
            return "FALSE";
        }
        if (!supportedResult(d.getType())) {
            throw new Unsupported("a condition on " + column.name() + " of type " + d.getType());
        }
        if (d.isOnlyNull()) {
            return "(" + x + " IS NULL)";
        }
        if (d.getValues().isAll()) {
            return d.isNullAllowed() ? "TRUE" : "(" + x + " IS NOT NULL)";
        }
        List<String> parts = new ArrayList<>();
        if (d.getValues().isDiscreteSet()) {
            List<String> items = new ArrayList<>();
            for (Object v : d.getValues().getDiscreteSet()) {
                items.add(literal(d.getType(), v));
            }
            parts.add(items.size() == 1 ? "(" + x + " = " + items.get(0) + ")" : "(" + x + " IN (" + String.join(", ", items) + "))");
        } else {
            List<String> singles = new ArrayList<>();
            for (Range r : d.getValues().getRanges().getOrderedRanges()) {
                if (r.isSingleValue()) {
                    singles.add(literal(d.getType(), r.getSingleValue()));
                    continue;
                }
                List<String> bounds = new ArrayList<>();
                if (!r.isLowUnbounded()) {
                    bounds.add(x + (r.isLowInclusive() ? " >= " : " > ") + literal(d.getType(), r.getLowBoundedValue()));
                }
                if (!r.isHighUnbounded()) {
                    bounds.add(x + (r.isHighInclusive() ? " <= " : " < ") + literal(d.getType(), r.getHighBoundedValue()));
                }
                parts.add(bounds.isEmpty() ? "(" + x + " IS NOT NULL)" : "(" + String.join(" AND ", bounds) + ")");
            }
            if (singles.size() == 1) {
                parts.add("(" + x + " = " + singles.get(0) + ")");
            } else if (!singles.isEmpty()) {
                parts.add("(" + x + " IN (" + String.join(", ", singles) + "))");
            }
        }
        if (d.isNullAllowed()) {
            parts.add("(" + x + " IS NULL)");
        }
        return parts.size() == 1 ? parts.get(0) : "(" + String.join(" OR ", parts) + ")";
    }
}
