package io.jumpgate.trino;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.function.Function;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SizeEstimateTest {
    private static final Map<String, Long> BYTES = Map.of("lineitem", 200_000_000L, "part", 6_000_000L, "orders", 50_000_000L,
            "nation", 2_000L);
    private static final Function<JumpgateTableHandle, DataRoot.Table> TABLES = h -> new DataRoot.Table(h.schema(), h.table(),
            h.table(), "parquet", List.of(), List.of(new DataRoot.DataFile(h.table() + "/part-0.parquet", BYTES.get(h.table()))));

    private static JumpgateTableHandle table(String name, String... filters) {
        return new JumpgateTableHandle("s", name).withFilters(List.of(filters));
    }

    private static JumpgateTableHandle join(JumpgateTableHandle probe, JumpgateTableHandle build, String type) {
        return JumpgateTableHandle.ofJoin(new JumpgateTableHandle.PushedJoin(probe, build, type, List.of("\"a\""), List.of("\"b\"")));
    }

    private static double estimate(JumpgateTableHandle h) {
        return SizeEstimate.of(h, TABLES).estimate();
    }

    @Test
    void aTableIsItsBytesAndAFilterKeepsAQuarter() {
        assertEquals(200_000_000, estimate(table("lineitem")));
        assertEquals(1_500_000, estimate(table("part", "(\"p_type\" = 'X')")));
    }

    @Test
    void anInnerJoinIsItsLargerSideTimesWhatTheSmallerKeeps() {
        // lineitem joined to filtered parts: a quarter of lineitem, whichever side Trino put where
        JumpgateTableHandle lp = join(table("part", "(\"p_type\" = 'X')"), table("lineitem"), "inner");
        assertEquals(50_000_000, estimate(lp));
        assertEquals(estimate(lp), estimate(join(table("lineitem"), table("part", "(\"p_type\" = 'X')"), "inner")));
        // ... which is still larger than the filtered orders it then joins: orders is built
        assertTrue(estimate(table("orders", "(\"o_orderdate\" < DATE '1995-01-01')")) < estimate(lp));
        // a left outer join is its left side
        assertEquals(2_000, estimate(join(table("nation"), table("lineitem"), "left_outer")));
    }
}
