package io.jumpgate.core;

import java.util.function.Supplier;

/**
 * Where jvm-core logs: {@link System.Logger} ("io.jumpgate.core") unless the host installs its own
 * {@link Sink} (the Spark plugin routes to Spark's logging; a Trino connector to airlift's). Core
 * has no logging dependency of its own, so it never fights a host's logging setup.
 */
public final class Log {
  /** A host's logger. */
  public interface Sink {
    void warn(String message);

    void debug(String message);

    boolean debugEnabled();
  }

  private static final System.Logger SYSTEM = System.getLogger("io.jumpgate.core");
  private static final Sink DEFAULT = new Sink() {
    @Override
    public void warn(String message) {
      SYSTEM.log(System.Logger.Level.WARNING, message);
    }

    @Override
    public void debug(String message) {
      SYSTEM.log(System.Logger.Level.DEBUG, message);
    }

    @Override
    public boolean debugEnabled() {
      return SYSTEM.isLoggable(System.Logger.Level.DEBUG);
    }
  };
  private static volatile Sink sink = DEFAULT;

  private Log() {}

  /** Install the host's logger (null: back to System.Logger). */
  public static void setSink(Sink s) {
    sink = s == null ? DEFAULT : s;
  }

  public static void warn(String message) {
    sink.warn(message);
  }

  public static void debug(Supplier<String> message) {
    Sink s = sink;
    if (s.debugEnabled()) s.debug(message.get());
  }
}
