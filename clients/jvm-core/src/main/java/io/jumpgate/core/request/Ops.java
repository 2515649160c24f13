package io.jumpgate.core.request;

import java.util.List;
import java.util.Map;

/**
 * Builders for the operations of contract section 1, for planners that would rather not spell the
 * fields. Columns, aggregates and schemas are lists of {@link JsonObject}; expressions are contract
 * expression text ({@link Expr}).
 */
public final class Ops {
  private Ops() {}

  /** {@code read}: files relative to the server's data root; schema: {@link #column(String, String)} entries. */
  public static Op read(String name, List<String> paths, String format, List<JsonObject> schema) {
    return Op.of("read", name).withField("path", paths).withField("format", format).withField("schema", schema);
  }

  public static Op filter(String name, String input, String condition) {
    return Op.of("filter", name).withInput("input", input).withField("condition", condition);
  }

  /** {@code project}: columns are {@link #expr(String, String)} entries. */
  public static Op project(String name, String input, List<JsonObject> columns) {
    return Op.of("project", name).withInput("input", input).withField("columns", columns);
  }

  /** {@code join}; type: inner, left_semi, left_anti or left_outer (left = probe). */
  public static Op join(String name, String build, String probe, List<String> buildKeys, List<String> probeKeys,
                        String type) {
    return new Op("join", name, Map.of(), Map.of()).withInput("build", build).withInput("probe", probe)
        .withField("build_keys", buildKeys).withField("probe_keys", probeKeys).withField("type", type);
  }

  /** {@code aggregate}; mode: complete, partial or final. */
  public static Op aggregate(String name, String input, List<JsonObject> groupBy, List<JsonObject> aggregates,
                             String mode) {
    return Op.of("aggregate", name).withInput("input", input).withField("group_by", groupBy)
        .withField("aggregates", aggregates).withField("mode", mode);
  }

  /** {@code shuffle}: P outputs, read by others as {@code name[i]}. */
  public static Op shuffle(String name, String input, List<String> keys, int partitions) {
    return Op.of("shuffle", name).withInput("input", input).withField("keys", keys).withField("partitions", partitions);
  }

  /** {@code send} over TCP to where the client listens. */
  public static Op send(String name, String input, String host, int port) {
    return Op.of("send", name).withInput("input", input).withField("transport", "tcp").withField("host", host)
        .withField("port", port);
  }

  /** A schema entry {@code {"name", "type"}}. */
  public static JsonObject column(String name, String type) {
    return JsonObject.of("name", name, "type", type);
  }

  /** A column {@code {"name", "expr"}} of a project, a join's columns or a group_by. */
  public static JsonObject expr(String name, String expr) {
    return JsonObject.of("name", name, "expr", expr);
  }

  /** An aggregate {@code {"name", "fn", "expr"}}; expr null for count_star. */
  public static JsonObject aggregate(String name, String fn, String expr) {
    return expr == null ? JsonObject.of("name", name, "fn", fn) : JsonObject.of("name", name, "fn", fn, "expr", expr);
  }
}
