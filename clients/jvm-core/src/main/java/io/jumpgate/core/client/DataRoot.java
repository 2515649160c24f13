package io.jumpgate.core.client;

import java.util.Optional;

/**
 * The directory a server resolves a read's relative paths in (GET /v1/nodes {@code data_root},
 * when all nodes agree), or why the server cannot say. Exactly one of root and why is set.
 */
public record DataRoot(String root, String why) {
  public static DataRoot of(String root) {
    return new DataRoot(root, null);
  }

  public static DataRoot unknown(String why) {
    return new DataRoot(null, why);
  }

  public boolean known() {
    return root != null;
  }

  public Optional<String> rootOption() {
    return Optional.ofNullable(root);
  }
}
