package io.jumpgate.trino;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The catalog's settings (etc/catalog/jumpgate.properties; docs/presto.md lists them). Unknown
 * {@code jumpgate.*} keys are an error, so a misspelt switch does not silently do nothing.
 */
public record JumpgateConfig(
        String url,
        Path dataRoot,
        boolean pushdown,
        Set<String> disabledOperators,
        int maxStreams,
        long jobTimeoutMs,
        long httpTimeoutMs,
        String listenAddress,
        String token,
        long dynamicFilterWaitMs,
        long dynamicFilterMinBytes,
        boolean streaming) {

    /** The operators a switch exists for: jumpgate.pushdown.OPERATOR=false keeps it in Trino. */
    public static final Set<String> OPERATORS = Set.of("filter", "projection", "aggregation", "join", "limit", "topn");

    public static JumpgateConfig from(Map<String, String> raw) {
        Map<String, String> p = new HashMap<>(raw);
        String url = take(p, "jumpgate.url", "http://127.0.0.1:8470").replaceAll("/+$", "");
        String root = p.remove("jumpgate.data-root");
        if (root == null || root.isBlank()) {
            throw new IllegalArgumentException("jumpgate.data-root is required: the Jumpgate server's data root, as this Trino sees it");
        }
        boolean pushdown = bool(take(p, "jumpgate.pushdown.enabled", "true"), "jumpgate.pushdown.enabled");
        Set<String> disabled = new TreeSet<>();
        for (String op : OPERATORS) {
            String key = "jumpgate.pushdown." + op;
            if (!bool(take(p, key, "true"), key)) {
                disabled.add(op);
            }
        }
        int maxStreams = Integer.parseInt(take(p, "jumpgate.max-streams", "2"));
        long jobTimeout = seconds(take(p, "jumpgate.job-timeout", "600s"));
        long httpTimeout = seconds(take(p, "jumpgate.http-timeout", "30s"));
        String listen = take(p, "jumpgate.listen-address", "127.0.0.1");
        String token = p.remove("jumpgate.token");
        boolean streaming = bool(take(p, "jumpgate.streaming", "true"), "jumpgate.streaming");
        long dynamicFilterWait = millis(take(p, "jumpgate.dynamic-filtering.wait-timeout", "10s"), "jumpgate.dynamic-filtering.wait-timeout");
        long dynamicFilterMinBytes = bytes(take(p, "jumpgate.dynamic-filtering.min-table-size", "16MB"),
                "jumpgate.dynamic-filtering.min-table-size");
        if (!p.isEmpty()) {
            throw new IllegalArgumentException("unknown Jumpgate catalog properties: " + new TreeSet<>(p.keySet())
                    + " (known: jumpgate.url, jumpgate.data-root, jumpgate.pushdown.enabled, jumpgate.pushdown.{"
                    + String.join(",", new TreeSet<>(OPERATORS)) + "}, jumpgate.max-streams, jumpgate.job-timeout,"
                    + " jumpgate.http-timeout, jumpgate.listen-address, jumpgate.token, jumpgate.dynamic-filtering.wait-timeout,"
                    + " jumpgate.dynamic-filtering.min-table-size, jumpgate.streaming)");
        }
        return new JumpgateConfig(url, Path.of(root), pushdown, disabled, Math.max(1, maxStreams), jobTimeout * 1000,
                httpTimeout * 1000, listen, token, dynamicFilterWait, dynamicFilterMinBytes, streaming);
    }

    /** Whether `op` (one of {@link #OPERATORS}) may be pushed down. */
    public boolean enabled(String op) {
        return pushdown && !disabledOperators.contains(op);
    }

    /** Why `op` is not pushed, when a switch says so. */
    public String switchedOff(String op) {
        return pushdown ? "jumpgate.pushdown." + op + "=false" : "jumpgate.pushdown.enabled=false";
    }

    private static String take(Map<String, String> p, String key, String dflt) {
        String v = p.remove(key);
        return v == null || v.isBlank() ? dflt : v.trim();
    }

    private static boolean bool(String v, String key) {
        return switch (v.toLowerCase(Locale.ROOT)) {
            case "true" -> true;
            case "false" -> false;
            default -> throw new IllegalArgumentException(key + " must be true or false, not " + v);
        };
    }

    /** A duration such as {@code 500ms}, {@code 10s}, {@code 1m}, or a number of seconds, in milliseconds. */
    private static long millis(String v, String key) {
        String s = v.toLowerCase(Locale.ROOT);
        try {
            if (s.endsWith("ms")) {
                return Long.parseLong(s.substring(0, s.length() - 2).trim());
            }
            if (s.endsWith("m")) {
                return Long.parseLong(s.substring(0, s.length() - 1).trim()) * 60_000;
            }
            return (long) (Double.parseDouble(s.endsWith("s") ? s.substring(0, s.length() - 1).trim() : s) * 1000);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(key + " must be a duration such as 500ms, 10s or 1m, not " + v);
        }
    }

    /** A data size such as {@code 16MB}, {@code 512kB}, {@code 1GB} (powers of 1024, as Trino's) or a number of bytes. */
    static long bytes(String v, String key) {
        String s = v.trim();
        int i = 0;
        while (i < s.length() && (Character.isDigit(s.charAt(i)) || s.charAt(i) == '.')) {
            i++;
        }
        long unit = switch (s.substring(i).trim().toUpperCase(Locale.ROOT)) {
            case "", "B" -> 1L;
            case "KB" -> 1L << 10;
            case "MB" -> 1L << 20;
            case "GB" -> 1L << 30;
            case "TB" -> 1L << 40;
            default -> -1L;
        };
        try {
            if (unit > 0 && i > 0) {
                return (long) (Double.parseDouble(s.substring(0, i)) * unit);
            }
        } catch (NumberFormatException e) {
            // below
        }
        throw new IllegalArgumentException(key + " must be a data size such as 16MB, 512kB or 0, not " + v);
    }

    private static long seconds(String v) {
        String s = v.toLowerCase(Locale.ROOT);
        if (s.endsWith("ms")) {
            return Math.max(1, Long.parseLong(s.substring(0, s.length() - 2)) / 1000);
        }
        if (s.endsWith("m")) {
            return Long.parseLong(s.substring(0, s.length() - 1)) * 60;
        }
        if (s.endsWith("s")) {
            s = s.substring(0, s.length() - 1);
        }
        return Long.parseLong(s);
    }
}
