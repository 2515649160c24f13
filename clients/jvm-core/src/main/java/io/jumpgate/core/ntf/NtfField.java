package io.jumpgate.core.ntf;

import java.io.Serializable;

import io.jumpgate.core.request.ContractType;

/** One field of an NTF layout: where it is in the fixed part, and its bit in the null vector. */
public record NtfField(String name, ContractType type, int offset, int size, int nullBit) implements Serializable {
  /** The null vector byte holding this field's bit. */
  public int nullByte() {
    return nullBit >> 3;
  }

  /** The mask of this field's bit in {@link #nullByte()}. */
  public int nullMask() {
    return 1 << (nullBit & 7);
  }
}
