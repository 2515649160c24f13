package io.jumpgate.core.run;

import java.io.IOException;

/**
 * A Jumpgate job failed: the server's error, a broken stream, a timeout, an output the engine
 * cannot read. The engine runs the work itself instead; the message says why (with the job id).
 */
public class JobFailedException extends IOException {
  private static final long serialVersionUID = 1L;

  public JobFailedException(String message) {
    super(message);
  }
}
