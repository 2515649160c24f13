package io.jumpgate.core.client;

import io.jumpgate.core.ntf.NtfLayout;

/**
 * What one {@code send} destination will receive (POST /v1/jobs, {@code outputs}): its NTF layout
 * and how many streams end there. {@link #layout()} parses (and validates) on first use, so a bad
 * layout surfaces where the engine checks it, as IllegalArgumentException.
 */
public final class OutputInfo {
  private final String name;
  private final String layoutJson;
  private final int expectedStreams;
  private volatile NtfLayout layout;

  public OutputInfo(String name, String layoutJson, int expectedStreams) {
    this.name = name;
    this.layoutJson = layoutJson;
    this.expectedStreams = expectedStreams;
  }

  /** The send operation's name. */
  public String name() {
    return name;
  }

  /** The layout as the server wrote it (compact JSON): keep it to decode the same way later. */
  public String layoutJson() {
    return layoutJson;
  }

  public int expectedStreams() {
    return expectedStreams;
  }

  public NtfLayout layout() {
    NtfLayout l = layout;
    if (l == null) layout = l = NtfLayout.fromJson(layoutJson);
    return l;
  }
}
