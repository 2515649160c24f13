package io.jumpgate.core.receive;

import java.io.IOException;

/** A stream that breaks the framing of contract section 3 (bad header, bad length, truncated, bad count). */
public final class NtfStreamException extends IOException {
  private static final long serialVersionUID = 1L;

  public NtfStreamException(String message) {
    super(message);
  }
}
