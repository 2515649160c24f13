package io.jumpgate.core.request;

import java.io.Serializable;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.UnaryOperator;

/**
 * One operation of a dataflow request (contract section 1): its {@code kind}, its {@code name}, the
 * fields that name other operations ({@code inputs}: "input", or "build" and "probe"), and the rest
 * of its fields ({@code body}: values as {@link Json} writes them). Inputs are kept apart from the
 * body so a planner can copy a set of operations with fresh names ({@link #renamed}), e.g. one copy
 * per destination group. Immutable and serializable.
 */
public final class Op implements Serializable {
  private static final long serialVersionUID = 1L;
  private final String kind;
  private final String name;
  private final LinkedHashMap<String, String> inputs;
  private final LinkedHashMap<String, Object> body;

  public Op(String kind, String name, Map<String, String> inputs, Map<String, ?> body) {
    this.kind = Objects.requireNonNull(kind, "kind");
    this.name = Objects.requireNonNull(name, "name");
    this.inputs = new LinkedHashMap<>(inputs);
    this.body = new LinkedHashMap<>(body);
  }

  /** An operation with no inputs and an empty body; add them with {@link #withInput}, {@link #withField}. */
  public static Op of(String kind, String name) {
    return new Op(kind, name, Map.of(), Map.of());
  }

  public String kind() {
    return kind;
  }

  public String name() {
    return name;
  }

  /** Input field -> the name of the operation it reads (e.g. "input" -> "scan_g0", or "spread[2]"). */
  public Map<String, String> inputs() {
    return Collections.unmodifiableMap(inputs);
  }

  public Map<String, Object> body() {
    return Collections.unmodifiableMap(body);
  }

  public Object get(String key) {
    return body.get(key);
  }

  /** A copy with input field {@code field} reading {@code opName}. */
  public Op withInput(String field, String opName) {
    LinkedHashMap<String, String> in = new LinkedHashMap<>(inputs);
    in.put(field, opName);
    return new Op(kind, name, in, body);
  }

  /** A copy with body field {@code key} set: replaced where it was, or appended. */
  public Op withField(String key, Object value) {
    LinkedHashMap<String, Object> b = new LinkedHashMap<>(body);
    b.put(key, value);
    return new Op(kind, name, inputs, b);
  }

  /**
   * A copy whose name and input names go through {@code f}. An input {@code NAME[i]} (a shuffle's
   * output) keeps its index: {@code f} sees only {@code NAME}.
   */
  public Op renamed(UnaryOperator<String> f) {
    LinkedHashMap<String, String> in = new LinkedHashMap<>();
    inputs.forEach((k, v) -> {
      int br = v.indexOf('[');
      in.put(k, br < 0 ? f.apply(v) : f.apply(v.substring(0, br)) + v.substring(br));
    });
    return new Op(kind, f.apply(name), in, body);
  }

  public String toJson() {
    StringBuilder b = new StringBuilder();
    writeJson(b);
    return b.toString();
  }

  void writeJson(StringBuilder b) {
    LinkedHashMap<String, Object> all = new LinkedHashMap<>();
    all.put("kind", kind);
    all.put("name", name);
    all.putAll(inputs);
    all.putAll(body);
    Json.write(b, all);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Op x && x.kind.equals(kind) && x.name.equals(name) && x.inputs.equals(inputs)
        && x.body.equals(body);
  }

  @Override
  public int hashCode() {
    return Objects.hash(kind, name, inputs, body);
  }

  @Override
  public String toString() {
    return toJson();
  }
}
