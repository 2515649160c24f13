package io.jumpgate.core.ntf;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.jumpgate.core.request.ContractType;

/**
 * An NTF layout as the server describes it for a {@code send} (contract section 2). The server
 * decides the layout (an NCA may dictate its own), so receivers read these numbers and never
 * compute offsets themselves; {@link #validate()} checks they are self-consistent, and
 * {@link #checkTypes} that they carry the types the engine expects.
 */
public final class NtfLayout implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private final int nullBytes;
  private final int fixedSize;
  private final boolean variable;
  private final List<NtfField> fields;

  public NtfLayout(int nullBytes, int fixedSize, boolean variable, List<NtfField> fields) {
    this.nullBytes = nullBytes;
    this.fixedSize = fixedSize;
    this.variable = variable;
    this.fields = List.copyOf(fields);
  }

  /** Parses and {@link #validate}s a layout; IllegalArgumentException when it is not a v1 layout. */
  public static NtfLayout fromJson(String json) {
    try {
      return fromJson(MAPPER.readTree(json));
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalArgumentException("NTF layout is not JSON: " + e.getOriginalMessage(), e);
    }
  }

  public static NtfLayout fromJson(JsonNode j) {
    if (j == null || !j.isObject()) throw new IllegalArgumentException("NTF layout is not a JSON object: " + j);
    int v = j.path("version").asInt(1);
    if (v != 1) throw new IllegalArgumentException("NTF layout version " + v + " (this client reads 1)");
    List<NtfField> fs = new ArrayList<>();
    for (JsonNode f : j.path("fields")) {
      fs.add(new NtfField(text(f, "name"), ContractType.parse(text(f, "type")), num(f, "offset"), num(f, "size"),
          num(f, "null_bit")));
    }
    NtfLayout layout = new NtfLayout(num(j, "null_bytes"), num(j, "fixed_size"), j.path("variable").asBoolean(false), fs);
    layout.validate();
    return layout;
  }

  private static String text(JsonNode j, String key) {
    JsonNode v = j.get(key);
    if (v == null || !v.isTextual()) throw new IllegalArgumentException("NTF layout: '" + key + "' missing in " + j);
    return v.asText();
  }

  private static int num(JsonNode j, String key) {
    JsonNode v = j.get(key);
    if (v == null || !v.canConvertToInt()) throw new IllegalArgumentException("NTF layout: '" + key + "' missing in " + j);
    return v.asInt();
  }

  /** Rejects a layout whose fields fall outside the tuple or the null vector, or have the wrong size. */
  public void validate() {
    if (nullBytes < 0 || fixedSize < nullBytes)
      throw new IllegalArgumentException("NTF layout: null_bytes " + nullBytes + ", fixed_size " + fixedSize);
    for (NtfField f : fields) {
      if (f.size() != f.type().ntfSize() || f.offset() < nullBytes || f.offset() + f.size() > fixedSize)
        throw new IllegalArgumentException("field " + f.name() + " (" + f.type() + ") at " + f.offset() + "+" + f.size()
            + " does not fit the layout");
      if (f.nullBit() < 0 || f.nullBit() >= nullBytes * 8)
        throw new IllegalArgumentException("field " + f.name() + " null bit " + f.nullBit() + " is outside the null vector");
    }
  }

  /** Rejects a layout whose fields are not, in order, of the types the engine planned for. */
  public void checkTypes(List<ContractType> expected) {
    if (fields.size() != expected.size())
      throw new IllegalArgumentException("layout has " + fields.size() + " fields, expected " + expected.size());
    for (int i = 0; i < expected.size(); i++) {
      NtfField f = fields.get(i);
      if (!f.type().equals(expected.get(i)))
        throw new IllegalArgumentException("field " + f.name() + " is " + f.type() + ", expected " + expected.get(i));
    }
    validate();
  }

  public int nullBytes() {
    return nullBytes;
  }

  /** The fixed part's size: the shortest valid tuple. */
  public int fixedSize() {
    return fixedSize;
  }

  /** Whether tuples may have a variable section (some field is a string). */
  public boolean variable() {
    return variable;
  }

  public List<NtfField> fields() {
    return fields;
  }

  public NtfField field(int i) {
    return fields.get(i);
  }

  public int size() {
    return fields.size();
  }

  /** A key that is equal for layouts that decode the same way (for caching generated decoders). */
  public String signature() {
    StringBuilder b = new StringBuilder().append(nullBytes).append('/').append(fixedSize).append('/');
    for (int i = 0; i < fields.size(); i++) {
      NtfField f = fields.get(i);
      if (i > 0) b.append(',');
      b.append(f.type().name()).append('@').append(f.offset()).append(':').append(f.nullBit());
    }
    return b.toString();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof NtfLayout l && l.nullBytes == nullBytes && l.fixedSize == fixedSize && l.variable == variable
        && l.fields.equals(fields);
  }

  @Override
  public int hashCode() {
    return signature().hashCode();
  }

  @Override
  public String toString() {
    return "NtfLayout(" + signature() + ")";
  }
}
