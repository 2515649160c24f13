package io.jumpgate.trino;

import io.jumpgate.core.request.Request;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static io.trino.spi.type.BigintType.BIGINT;
import static io.trino.spi.type.VarcharType.VARCHAR;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A join one of whose sides has its own pushed aggregation: TPC-H Q4 as Trino plans it, the
 * quarter's orders joined with lineitem's distinct order keys. The side's aggregation runs under
 * the join in the same job, and the join outputs the aggregation's columns.
 */
class AggregatedJoinSideTest {
    private static DataRoot root(Path dir) throws IOException {
        Path schema = dir.resolve("tpch/parquet");
        Files.createDirectories(schema.resolve("orders"));
        Files.createDirectories(schema.resolve("lineitem"));
        Files.writeString(schema.resolve("manifest.json"), "{\"format\": \"parquet\"}");
        Files.writeString(schema.resolve("orders.schema.json"),
                "[{\"name\": \"o_orderkey\", \"type\": \"int64\"}, {\"name\": \"o_orderpriority\", \"type\": \"string\"}]");
        Files.writeString(schema.resolve("lineitem.schema.json"),
                "[{\"name\": \"l_orderkey\", \"type\": \"int64\"}, {\"name\": \"l_commitdate\", \"type\": \"date\"},"
                        + " {\"name\": \"l_receiptdate\", \"type\": \"date\"}]");
        Files.write(schema.resolve("orders/part-0.parquet"), new byte[1000]);
        Files.write(schema.resolve("lineitem/part-0.parquet"), new byte[4000]);
        return new DataRoot(dir);
    }

    private static JumpgateTableHandle distinctOrderKeys() {
        return new JumpgateTableHandle("tpch_parquet", "lineitem")
                .withFilters(List.of("(\"l_commitdate\" < \"l_receiptdate\")"))
                .withAggregation(new JumpgateTableHandle.PushedAggregation(
                        List.of(new JumpgateTableHandle.Item("g0", null, Sql.ident("l_orderkey"))), List.of(), List.of()));
    }

    @Test
    void theAggregationRunsUnderTheJoinAndItsColumnsAreTheJoins(@TempDir Path dir) throws IOException {
        DataRoot root = root(dir);
        JumpgateTableHandle orders = new JumpgateTableHandle("tpch_parquet", "orders")
                .withFilters(List.of("(\"o_orderpriority\" <> 'x')"));
        JumpgateTableHandle joined = JumpgateTableHandle.ofJoin(new JumpgateTableHandle.PushedJoin(distinctOrderKeys(), orders,
                "inner", List.of(Sql.ident("g0")), List.of(Sql.ident("o_orderkey"))));
        List<JumpgateColumnHandle> out = List.of(JumpgateColumnHandle.base("o_orderpriority", VARCHAR),
                new JumpgateColumnHandle("g0", BIGINT, Sql.ident("g0"), true));
        // Trino's dynamic filter on the group key holds for lineitem's rows; none on the base column name.
        Request r = RequestBuilder.build("q4", joined, root, List.of(List.of()),
                Map.of("g0", "(\"g0\" IN (1, 7))", "l_orderkey", "(\"l_orderkey\" = 5)"), out, "127.0.0.1", List.of(9000));
        String json = r.toJson();
        assertTrue(json.contains("{\"kind\":\"aggregate\",\"name\":\"agg_g0l\",\"input\":\"filter_g0l\""), json);
        assertTrue(json.contains("\"group_by\":[{\"name\":\"g0\",\"expr\":\"\\\"l_orderkey\\\"\"}]"), json);
        assertTrue(json.contains("\"condition\":\"(\\\"l_commitdate\\\" < \\\"l_receiptdate\\\") AND (\\\"l_orderkey\\\" IN (1, 7))\""), json);
        assertFalse(json.contains("(\\\"l_orderkey\\\" = 5)"), json);
        assertTrue(json.contains("\"build\":\"columns_g0r\",\"probe\":\"agg_g0l\""), json);
        assertFalse(json.contains("columns_g0l"), json); // the aggregation reads only what it needs
        assertTrue(joined.toString().contains("pushed join=[inner (tpch_parquet.lineitem pushed filter=[(\"l_commitdate\" < "
                + "\"l_receiptdate\")] pushed aggregation=[group by [g0:=\"l_orderkey\"], []]) WITH (tpch_parquet.orders"), joined.toString());
    }

    @Test
    void aGroupedSideCountsAsItsInputAndAGlobalOneAsARow(@TempDir Path dir) throws IOException {
        DataRoot root = root(dir);
        JumpgateTableHandle orders = new JumpgateTableHandle("tpch_parquet", "orders").withFilters(List.of("TRUE"));
        JumpgateTableHandle lineitem = distinctOrderKeys();
        double o = SizeEstimate.of(orders, h -> root.table(h.schema(), h.table()).orElseThrow()).estimate();
        double l = SizeEstimate.of(lineitem, h -> root.table(h.schema(), h.table()).orElseThrow()).estimate();
        assertEquals(4000 * SizeEstimate.FILTERED, l);
        assertTrue(o < l, o + " " + l); // orders is built, lineitem's groups probe it
        JumpgateTableHandle global = new JumpgateTableHandle("tpch_parquet", "lineitem")
                .withAggregation(new JumpgateTableHandle.PushedAggregation(List.of(),
                        List.of(new JumpgateTableHandle.Item("a0", "count_star", null)), List.of()));
        assertEquals(1, SizeEstimate.of(global, h -> root.table(h.schema(), h.table()).orElseThrow()).estimate());
        assertEquals(Optional.empty(), global.join());
    }
}
