package io.jumpgate.core.request;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * An ordered JSON object inside a request body, e.g. one {@code {"name", "expr"}} column. Ordered
 * so that the same request always serializes to the same text (the Spark planner caches server
 * verdicts by request text). Immutable and serializable: requests travel with engine tasks.
 */
public final class JsonObject implements Serializable {
  private static final long serialVersionUID = 1L;
  private final LinkedHashMap<String, Object> fields;

  private JsonObject(LinkedHashMap<String, Object> fields) {
    this.fields = fields;
  }

  /** {@code JsonObject.of("name", "c0", "expr", "a + 1")}: keys and values alternate. */
  public static JsonObject of(Object... keysAndValues) {
    if (keysAndValues.length % 2 != 0) throw new IllegalArgumentException("keys and values must alternate");
    LinkedHashMap<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < keysAndValues.length; i += 2) m.put((String) keysAndValues[i], keysAndValues[i + 1]);
    return new JsonObject(m);
  }

  public static JsonObject of(Map<String, ?> fields) {
    return new JsonObject(new LinkedHashMap<>(fields));
  }

  /** A copy with {@code key} set (replaced in place when present, else appended). */
  public JsonObject withField(String key, Object value) {
    LinkedHashMap<String, Object> m = new LinkedHashMap<>(fields);
    m.put(key, value);
    return new JsonObject(m);
  }

  public Object get(String key) {
    return fields.get(key);
  }

  public Map<String, Object> fields() {
    return Collections.unmodifiableMap(fields);
  }

  public List<String> keys() {
    return new ArrayList<>(fields.keySet());
  }

  public String toJson() {
    return Json.write(this);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof JsonObject j && j.fields.equals(fields) && j.keys().equals(keys());
  }

  @Override
  public int hashCode() {
    return fields.hashCode();
  }

  @Override
  public String toString() {
    return toJson();
  }
}
