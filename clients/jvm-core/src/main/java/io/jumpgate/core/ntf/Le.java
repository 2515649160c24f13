package io.jumpgate.core.ntf;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Little-endian reads from byte arrays (contract section 2: all NTF integers are little-endian).
 * VarHandle byte-array views are intrinsified by the JIT into single loads on any host order; the
 * generated NTF decoders call these static methods directly.
 */
public final class Le {
  private static final VarHandle I32 =
      MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle I64 =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle F64 =
      MethodHandles.byteArrayViewVarHandle(double[].class, ByteOrder.LITTLE_ENDIAN);

  private Le() {}

  public static int i32(byte[] b, int off) {
    return (int) I32.get(b, off);
  }

  public static long i64(byte[] b, int off) {
    return (long) I64.get(b, off);
  }

  public static double f64(byte[] b, int off) {
    return (double) F64.get(b, off);
  }

  /** An unsigned u32 as a non-negative long. */
  public static long u32(byte[] b, int off) {
    return ((int) I32.get(b, off)) & 0xFFFFFFFFL;
  }

  /** A u64 as a long (two's complement: callers compare counts, which never reach 2^63). */
  public static long u64(byte[] b, int off) {
    return (long) I64.get(b, off);
  }

  public static void putF64(byte[] b, int off, double v) {
    F64.set(b, off, v);
  }

  public static void putI32(byte[] b, int off, int v) {
    I32.set(b, off, v);
  }

  public static void putI64(byte[] b, int off, long v) {
    I64.set(b, off, v);
  }
}
