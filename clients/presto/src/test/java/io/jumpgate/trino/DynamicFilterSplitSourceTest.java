package io.jumpgate.trino;

import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.predicate.Domain;
import io.trino.spi.predicate.Range;
import io.trino.spi.predicate.TupleDomain;
import io.trino.spi.predicate.ValueSet;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static io.trino.spi.type.BigintType.BIGINT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

class DynamicFilterSplitSourceTest {
    private static final JumpgateColumnHandle O_KEY = JumpgateColumnHandle.base("o_orderkey", BIGINT);

    private static JumpgateTableHandle join(String type) {
        JumpgateTableHandle orders = new JumpgateTableHandle("tpch_parquet", "orders");
        JumpgateTableHandle lineitem = new JumpgateTableHandle("tpch_parquet", "lineitem");
        return JumpgateTableHandle.ofJoin(new JumpgateTableHandle.PushedJoin(orders, lineitem, type,
                List.of(Sql.ident("o_orderkey")), List.of(Sql.ident("l_orderkey"))));
    }

    private static TupleDomain<ColumnHandle> keys(JumpgateColumnHandle c, long... values) {
        List<Object> v = new ArrayList<>();
        for (long x : values) {
            v.add(x);
        }
        return TupleDomain.withColumnDomains(Map.of(c, Domain.multipleValues(BIGINT, v)));
    }

    @Test
    void anInnerJoinCopiesAConditionToTheOtherKey() {
        Map<String, String> c = DynamicFilterSplitSource.conditions(join("inner"), keys(O_KEY, 7, 3));
        assertEquals("(\"o_orderkey\" IN (3, 7))", c.get("o_orderkey"));
        assertEquals("(\"l_orderkey\" IN (3, 7))", c.get("l_orderkey"));
    }

    @Test
    void aLeftOuterJoinCopiesOnlyFromItsLeftSide() {
        assertEquals(2, DynamicFilterSplitSource.conditions(join("left_outer"), keys(O_KEY, 5)).size());
        JumpgateColumnHandle lKey = JumpgateColumnHandle.base("l_orderkey", BIGINT);
        Map<String, String> c = DynamicFilterSplitSource.conditions(join("left_outer"), keys(lKey, 5));
        assertEquals(Map.of("l_orderkey", "(\"l_orderkey\" = 5)"), c); // the kept side keeps every row
    }

    @Test
    void manyValuesBecomeTheirSpanAndAnEmptyBuildSideIsFalse() {
        long[] many = new long[DynamicFilterSplitSource.MAX_VALUES + 1];
        for (int i = 0; i < many.length; i++) {
            many[i] = 10L * i;
        }
        Map<String, String> c = DynamicFilterSplitSource.conditions(new JumpgateTableHandle("s", "orders"), keys(O_KEY, many));
        assertEquals("(\"o_orderkey\" >= 0 AND \"o_orderkey\" <= " + 10L * DynamicFilterSplitSource.MAX_VALUES + ")", c.get("o_orderkey"));
        // one value fewer: the list itself
        c = DynamicFilterSplitSource.conditions(new JumpgateTableHandle("s", "orders"),
                keys(O_KEY, java.util.Arrays.copyOf(many, DynamicFilterSplitSource.MAX_VALUES)));
        assertEquals(DynamicFilterSplitSource.MAX_VALUES, c.get("o_orderkey").split(",").length);
        assertEquals(Map.of("", "FALSE"), DynamicFilterSplitSource.conditions(join("inner"), TupleDomain.none()));
    }

    @Test
    void outputsOfAPushedAggregationAreLeftToTrino() {
        JumpgateColumnHandle g = new JumpgateColumnHandle("g0", BIGINT, Sql.ident("g0"), true);
        TupleDomain<ColumnHandle> d = TupleDomain.withColumnDomains(Map.of(g,
                Domain.create(ValueSet.ofRanges(Range.greaterThan(BIGINT, 4L)), false)));
        assertFalse(DynamicFilterSplitSource.conditions(join("inner"), d).containsKey("g0"));
        assertEquals(Map.of(), DynamicFilterSplitSource.conditions(join("inner"), d));
    }
}
