package io.jumpgate.core.client;

import java.io.IOException;

/** The server could not be reached at all (connection refused, timeout). */
public final class ServerUnreachable extends IOException {
  private static final long serialVersionUID = 1L;

  public ServerUnreachable(String message, Throwable cause) {
    super(message, cause);
  }
}
