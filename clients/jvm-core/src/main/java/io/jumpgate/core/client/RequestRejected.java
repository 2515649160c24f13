package io.jumpgate.core.client;

import java.io.IOException;
import java.util.Optional;

/**
 * The server answered with an error status (contract section 4): 400/422 a bad request, 404 an
 * unknown job, 409 a wrong state, 503 no free NCA resources now (retry: {@link JumpgateClient#retryOn503}).
 */
public final class RequestRejected extends IOException {
  private static final long serialVersionUID = 1L;
  private final int status;
  private final String serverMessage;
  private final String operation;
  private final String path;
  private final String body;

  public RequestRejected(int status, String serverMessage, String operation, String path, String body) {
    super("HTTP " + status + ": " + serverMessage);
    this.status = status;
    this.serverMessage = serverMessage;
    this.operation = operation;
    this.path = path;
    this.body = body;
  }

  public int status() {
    return status;
  }

  /** The server's {@code error.message}. */
  public String serverMessage() {
    return serverMessage;
  }

  /** The request operation the error names ({@code error.operation}), if any. */
  public Optional<String> operation() {
    return Optional.ofNullable(operation);
  }

  /** Where in the request ({@code error.path}, e.g. "operations[2].condition"), if given. */
  public Optional<String> path() {
    return Optional.ofNullable(path);
  }

  /** The answer's body as received. */
  public String body() {
    return body;
  }
}
