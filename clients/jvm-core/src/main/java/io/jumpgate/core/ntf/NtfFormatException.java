package io.jumpgate.core.ntf;

/**
 * NTF bytes that break their layout or framing (contract sections 2 and 3): a string outside its
 * tuple's variable section, a decimal beyond its precision, a tuple shorter than its fixed part.
 * Unchecked: decoders run inside engine iterators that cannot throw checked exceptions.
 */
public final class NtfFormatException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  public NtfFormatException(String message) {
    super(message);
  }

  /** "corrupt NTF tuple at byte T: what" (T: the tuple's first byte in its buffer). */
  public static NtfFormatException corrupt(String what, int tupleStart) {
    return new NtfFormatException("corrupt NTF tuple at byte " + tupleStart + ": " + what);
  }
}
