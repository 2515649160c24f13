package io.jumpgate.core.request;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.UnaryOperator;

/** A dataflow request (contract section 1): a label and its operations. Immutable, serializable. */
public final class Request implements Serializable {
  private static final long serialVersionUID = 1L;
  private final String name;
  private final List<Op> ops;

  public Request(String name, List<Op> ops) {
    this.name = name;
    this.ops = List.copyOf(ops);
  }

  public String name() {
    return name;
  }

  public List<Op> ops() {
    return ops;
  }

  public Optional<Op> op(String opName) {
    return ops.stream().filter(o -> o.name().equals(opName)).findFirst();
  }

  /** A copy with every operation mapped through {@code f} (e.g. pointing sends at new ports). */
  public Request mapOps(UnaryOperator<Op> f) {
    List<Op> out = new ArrayList<>(ops.size());
    for (Op o : ops) out.add(f.apply(o));
    return new Request(name, out);
  }

  /** {@code {"name": ..., "operations": [...]}}; the name is left out when null. */
  public String toJson() {
    StringBuilder b = new StringBuilder("{");
    if (name != null) b.append("\"name\":").append(Json.str(name)).append(',');
    b.append("\"operations\":[");
    for (int i = 0; i < ops.size(); i++) {
      if (i > 0) b.append(',');
      ops.get(i).writeJson(b);
    }
    return b.append("]}").toString();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Request r && Objects.equals(r.name, name) && r.ops.equals(ops);
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, ops);
  }

  @Override
  public String toString() {
    return toJson();
  }
}
