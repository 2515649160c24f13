package io.jumpgate.trino;

import io.jumpgate.core.request.Request;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static io.trino.spi.type.IntegerType.INTEGER;
import static io.trino.spi.type.VarcharType.VARCHAR;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A table joined with itself (TPC-H Q7's and Q8's two nations): one side's columns are renamed in its scan. */
class SelfJoinTest {
    private static DataRoot nationRoot(Path dir) throws IOException {
        Path schema = dir.resolve("tpch/parquet");
        Files.createDirectories(schema.resolve("nation"));
        Files.writeString(schema.resolve("manifest.json"), "{\"format\": \"parquet\"}");
        Files.writeString(schema.resolve("nation.schema.json"),
                "[{\"name\": \"n_nationkey\", \"type\": \"int32\"}, {\"name\": \"n_name\", \"type\": \"string\"},"
                        + " {\"name\": \"n_comment\", \"type\": \"string\"}]");
        Files.write(schema.resolve("nation/part-0.parquet"), new byte[100]);
        return new DataRoot(dir);
    }

    @Test
    void theRenamedSideReadsItsBaseColumnsAndNamesThemApart(@TempDir Path dir) throws IOException {
        DataRoot root = nationRoot(dir);
        JumpgateTableHandle n1 = new JumpgateTableHandle("tpch_parquet", "nation").withFilters(List.of("(\"n_name\" = 'FRANCE')"));
        JumpgateTableHandle n2 = new JumpgateTableHandle("tpch_parquet", "nation")
                .withFilters(List.of("(\"n_name\" = 'GERMANY')"))
                .withRenames(Map.of("n_nationkey", "n_nationkey_2", "n_name", "n_name_2", "n_comment", "n_comment_2"));
        assertEquals("n_name_2", n2.jobName("n_name"));
        assertTrue(n2.toString().contains("renamed=[n_comment AS n_comment_2, n_name AS n_name_2, n_nationkey AS n_nationkey_2]"), n2.toString());
        JumpgateTableHandle joined = JumpgateTableHandle.ofJoin(new JumpgateTableHandle.PushedJoin(n1, n2, "inner",
                List.of(Sql.ident("n_nationkey")), List.of(Sql.ident("n_nationkey_2"))));
        List<JumpgateColumnHandle> out = List.of(JumpgateColumnHandle.base("n_name", VARCHAR), JumpgateColumnHandle.base("n_name_2", VARCHAR));
        // A dynamic filter on the renamed key (it names the column as the job does).
        Request r = RequestBuilder.build("q", joined, root, List.of(List.of()), Map.of("n_nationkey_2", "(\"n_nationkey_2\" IN (6, 7))"),
                out, "127.0.0.1", List.of(9000));
        String json = r.toJson();
        // The renamed scan filters its base names, then renames only the columns needed above it.
        assertTrue(json.contains("\"condition\":\"(\\\"n_name\\\" = 'GERMANY') AND (\\\"n_nationkey\\\" IN (6, 7))\""), json);
        assertTrue(json.contains("{\"name\":\"n_nationkey_2\",\"expr\":\"\\\"n_nationkey\\\"\"}"), json);
        assertTrue(json.contains("{\"name\":\"n_name_2\",\"expr\":\"\\\"n_name\\\"\"}"), json);
        assertFalse(json.contains("n_comment_2"), json); // read, but not needed above its scan
        // The other side keeps its names and is not filtered by the renamed side's dynamic filter.
        assertTrue(json.contains("\"condition\":\"(\\\"n_name\\\" = 'FRANCE')\""), json);
    }

    @Test
    void renamingRewritesQuotedIdentifiersOnly() {
        Map<String, String> names = Map.of("n_name", "n_name_2", "a\"b", "c");
        assertEquals("(\"n_name_2\" = 'n_name' OR \"x\" LIKE '%\"n_name\"%')",
                Sql.renamed("(\"n_name\" = 'n_name' OR \"x\" LIKE '%\"n_name\"%')", names));
        assertEquals("\"c\" > 'it''s'", Sql.renamed("\"a\"\"b\" > 'it''s'", names));
        assertEquals("\"n_name\"", Sql.renamed("\"n_name\"", Map.of()));
    }
}
