package io.jumpgate.core.client;

import java.util.Optional;

/** A job's state (GET /v1/jobs/{id}) and, when it failed, the server's message. */
public record JobStatus(String jobId, String state, String error) {
  public boolean terminal() {
    return succeeded() || failed() || cancelled();
  }

  public boolean succeeded() {
    return "succeeded".equals(state);
  }

  public boolean failed() {
    return "failed".equals(state);
  }

  public boolean cancelled() {
    return "cancelled".equals(state);
  }

  public Optional<String> errorMessage() {
    return Optional.ofNullable(error);
  }
}
