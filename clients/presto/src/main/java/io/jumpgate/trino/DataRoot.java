package io.jumpgate.trino;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * The tables under the data root, in the layout `jumpgate datagen` writes:
 * <pre>
 *   ROOT/tpch/json/manifest.json              {"format": "json", ...}
 *   ROOT/tpch/json/lineitem/part-0.jsonl ...  the table's files
 *   ROOT/tpch/json/lineitem.schema.json       [{"name": "l_orderkey", "type": "int64"}, ...]
 *                                             (or, as written earlier, lineitem/schema.json)
 * </pre>
 * A folder holding tables is a schema, named by its path under the root with {@code /} as
 * {@code _} ({@code tpch/json} is schema {@code tpch_json}); tables right under the root are in
 * schema {@code default}. Names are lower-cased, as Trino's are. Scanned again at most every few
 * seconds, so new datasets appear without a restart.
 */
public final class DataRoot {
    public record Column(String name, String type) {}

    public record DataFile(String path, long bytes) {}

    /** `dir` and the paths of `files` are relative to the data root (the server resolves them in its own). */
    public record Table(String schema, String name, String dir, String format, List<Column> columns, List<DataFile> files) {}

    private static final int MAX_DEPTH = 4;
    private static final long RESCAN_MS = 5000;
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Map<String, String> EXTENSIONS = Map.of(
            "jsonl", "json", "json", "json", "ndjson", "json", "orc", "orc", "parquet", "parquet", "csv", "csv");

    private final Path root;
    private Map<String, Map<String, Table>> schemas = Map.of();
    private long scannedAt = Long.MIN_VALUE;

    public DataRoot(Path root) {
        this.root = root.toAbsolutePath().normalize();
    }

    public Path root() {
        return root;
    }

    public synchronized Map<String, Map<String, Table>> schemas() {
        long now = System.currentTimeMillis();
        if (scannedAt == Long.MIN_VALUE || now - scannedAt > RESCAN_MS) {
            schemas = scan();
            scannedAt = now;
        }
        return schemas;
    }

    public Optional<Table> table(String schema, String table) {
        return Optional.ofNullable(schemas().getOrDefault(schema, Map.of()).get(table));
    }

    private Map<String, Map<String, Table>> scan() {
        Map<String, Map<String, Table>> out = new TreeMap<>();
        if (!Files.isDirectory(root)) {
            return out;
        }
        scanDir(root, 0, out);
        return out;
    }

    private void scanDir(Path dir, int depth, Map<String, Map<String, Table>> out) {
        List<Path> subdirs;
        try (Stream<Path> s = Files.list(dir)) {
            subdirs = s.filter(Files::isDirectory).filter(p -> !p.getFileName().toString().startsWith("."))
                    .sorted(Comparator.comparing(Path::toString)).toList();
        } catch (IOException e) {
            return;
        }
        String schemaName = schemaName(dir);
        for (Path sub : subdirs) {
            Optional<Path> schemaFile = schemaFile(sub);
            if (schemaFile.isPresent()) {
                Table t = readTable(schemaName, sub, schemaFile.get());
                if (t != null) {
                    out.computeIfAbsent(schemaName, k -> new TreeMap<>()).put(t.name(), t);
                }
            } else if (depth + 1 < MAX_DEPTH) {
                scanDir(sub, depth + 1, out);
            }
        }
    }

    private String schemaName(Path dir) {
        String rel = root.relativize(dir).toString();
        return rel.isEmpty() ? "default" : rel.replace('/', '_').toLowerCase(Locale.ROOT);
    }

    static Optional<Path> schemaFile(Path tableDir) {
        Path beside = tableDir.resolveSibling(tableDir.getFileName() + ".schema.json");
        if (Files.isRegularFile(beside)) {
            return Optional.of(beside);
        }
        Path legacy = tableDir.resolve("schema.json");
        return Files.isRegularFile(legacy) ? Optional.of(legacy) : Optional.empty();
    }

    private Table readTable(String schema, Path dir, Path schemaFile) {
        try {
            JsonNode cols = JSON.readTree(schemaFile.toFile());
            List<Column> columns = new ArrayList<>();
            for (JsonNode c : cols) {
                columns.add(new Column(c.get("name").asText(), c.get("type").asText()));
            }
            List<DataFile> files = new ArrayList<>();
            String format = manifestFormat(dir.getParent());
            try (Stream<Path> s = Files.list(dir)) {
                for (Path f : s.sorted().toList()) {
                    String n = f.getFileName().toString();
                    int dot = n.lastIndexOf('.');
                    String fmt = dot < 0 ? null : EXTENSIONS.get(n.substring(dot + 1).toLowerCase(Locale.ROOT));
                    if (fmt == null || n.startsWith(".") || n.startsWith("_") || n.equals("schema.json") || !Files.isRegularFile(f)) {
                        continue;
                    }
                    if (format == null) {
                        format = fmt;
                    }
                    if (fmt.equals(format)) {
                        files.add(new DataFile(root.relativize(f).toString(), Files.size(f)));
                    }
                }
            }
            if (format == null) {
                return null;
            }
            return new Table(schema, dir.getFileName().toString().toLowerCase(Locale.ROOT), root.relativize(dir).toString(),
                    format, List.copyOf(columns), List.copyOf(files));
        } catch (IOException | RuntimeException e) {
            return null; // not a table we can read (a broken schema file): not listed
        }
    }

    private static String manifestFormat(Path dir) {
        Path m = dir.resolve("manifest.json");
        if (!Files.isRegularFile(m)) {
            return null;
        }
        try {
            JsonNode f = JSON.readTree(m.toFile()).get("format");
            return f == null || !f.isTextual() ? null : f.asText();
        } catch (IOException e) {
            return null;
        }
    }
}
