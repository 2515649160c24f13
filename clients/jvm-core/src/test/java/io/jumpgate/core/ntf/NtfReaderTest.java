package io.jumpgate.core.ntf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;

import io.jumpgate.core.request.ContractType;

class NtfReaderTest {
  /** The contract's example layout (section 2) plus one field of every other type. */
  static final String LAYOUT = "{\"version\": 1, \"null_bytes\": 8, \"fixed_size\": 64, \"variable\": true, \"fields\": ["
      + "{\"name\": \"state\", \"type\": \"string\", \"offset\": 8, \"size\": 8, \"null_bit\": 0},"
      + "{\"name\": \"total_price\", \"type\": \"float64\", \"offset\": 16, \"size\": 8, \"null_bit\": 1},"
      + "{\"name\": \"qty\", \"type\": \"int32\", \"offset\": 24, \"size\": 4, \"null_bit\": 2},"
      + "{\"name\": \"id\", \"type\": \"int64\", \"offset\": 32, \"size\": 8, \"null_bit\": 3},"
      + "{\"name\": \"price\", \"type\": \"DECIMAL(12, 2)\", \"offset\": 40, \"size\": 8, \"null_bit\": 4},"
      + "{\"name\": \"day\", \"type\": \"date\", \"offset\": 48, \"size\": 4, \"null_bit\": 5},"
      + "{\"name\": \"ok\", \"type\": \"boolean\", \"offset\": 56, \"size\": 1, \"null_bit\": 6}]}";

  static NtfLayout layout() {
    return NtfLayout.fromJson(LAYOUT);
  }

  @Test
  void parsesTheLayout() {
    NtfLayout l = layout();
    assertEquals(8, l.nullBytes());
    assertEquals(64, l.fixedSize());
    assertTrue(l.variable());
    assertEquals(7, l.size());
    assertEquals(ContractType.decimal(12, 2), l.field(4).type());
    assertEquals("decimal(12,2)", l.field(4).type().name());
    l.checkTypes(List.of(ContractType.STRING, ContractType.FLOAT64, ContractType.INT32, ContractType.INT64,
        ContractType.decimal(12, 2), ContractType.DATE, ContractType.BOOLEAN));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> l.checkTypes(List.of(ContractType.INT64)));
    assertTrue(e.getMessage().contains("7 fields, expected 1"), e.getMessage());
  }

  @Test
  void rejectsLayoutsThatDoNotFit() {
    String overlap = LAYOUT.replace("\"offset\": 56, \"size\": 1", "\"offset\": 64, \"size\": 1");
    assertTrue(assertThrows(IllegalArgumentException.class, () -> NtfLayout.fromJson(overlap)).getMessage()
        .contains("does not fit"));
    String badBit = LAYOUT.replace("\"null_bit\": 6", "\"null_bit\": 64");
    assertTrue(assertThrows(IllegalArgumentException.class, () -> NtfLayout.fromJson(badBit)).getMessage()
        .contains("outside the null vector"));
    String v2 = LAYOUT.replace("\"version\": 1", "\"version\": 2");
    assertTrue(assertThrows(IllegalArgumentException.class, () -> NtfLayout.fromJson(v2)).getMessage()
        .contains("version 2"));
    assertThrows(IllegalArgumentException.class, () -> NtfLayout.fromJson("[1]"));
  }

  @Test
  void readsEveryTypeFromHandWrittenBytes() {
    // Tuple bytes written by hand (not with NtfWriter), as contract section 2 lays them out.
    byte[] t = new byte[64 + 2];
    t[0] = 0b0000_0000; // no nulls
    Le.putI32(t, 8, 64); // string at 64
    Le.putI32(t, 12, 2); // length 2
    Le.putF64(t, 16, 12.5);
    Le.putI32(t, 24, -7);
    Le.putI64(t, 32, 1L << 40);
    Le.putI64(t, 40, -123456); // -1234.56
    Le.putI32(t, 48, 10_000); // 1997-05-19
    t[56] = 1;
    t[64] = 'C';
    t[65] = 'A';
    NtfReader r = new NtfReader(layout());
    assertFalse(r.isNull(t, 0, 0));
    assertEquals("CA", r.getString(t, 0, t.length, 0));
    assertEquals(64, r.stringOffset(t, 0, t.length, 0));
    assertEquals(2, r.stringLength(t, 0, 0));
    assertEquals(12.5, r.getDouble(t, 0, 1));
    assertEquals(-7, r.getInt(t, 0, 2));
    assertEquals(1L << 40, r.getLong(t, 0, 3));
    assertEquals(-123456L, r.getDecimal(t, 0, 4));
    assertEquals(10_000, r.getInt(t, 0, 5));
    assertTrue(r.getBoolean(t, 0, 6));
  }

  @Test
  void nullBitsAreReadPerField() {
    NtfLayout l = layout();
    byte[] t = new NtfWriter(l).setNull(1).setNull(6).setLong(3, 5).finish();
    NtfReader r = new NtfReader(l);
    assertTrue(r.isNull(t, 0, 1));
    assertTrue(r.isNull(t, 0, 6));
    assertFalse(r.isNull(t, 0, 3));
    assertEquals(0b0100_0010, t[0]);
  }

  @Test
  void aStringOutsideTheVariableSectionIsCorrupt() {
    NtfLayout l = layout();
    byte[] t = new NtfWriter(l).setString(0, "hello").finish();
    NtfReader r = new NtfReader(l);
    Le.putI32(t, 12, 6); // one byte past the tuple
    NtfFormatException e = assertThrows(NtfFormatException.class, () -> r.getString(t, 0, t.length, 0));
    assertTrue(e.getMessage().contains("string field state outside the variable section"), e.getMessage());
    Le.putI32(t, 8, 8); // into the fixed part
    Le.putI32(t, 12, 1);
    assertThrows(NtfFormatException.class, () -> r.stringOffset(t, 0, t.length, 0));
    Le.putI32(t, 12, -1);
    assertThrows(NtfFormatException.class, () -> r.stringOffset(t, 0, t.length, 0));
  }

  @Test
  void aDecimalBeyondItsPrecisionIsCorrupt() {
    NtfLayout l = layout();
    NtfReader r = new NtfReader(l);
    byte[] ok = new NtfWriter(l).setLong(4, 999_999_999_999L).finish();
    assertEquals(999_999_999_999L, r.getDecimal(ok, 0, 4));
    byte[] bad = new NtfWriter(l).setLong(4, -1_000_000_000_000L).finish();
    assertTrue(assertThrows(NtfFormatException.class, () -> r.getDecimal(bad, 0, 4)).getMessage()
        .contains("exceeds its precision"));
  }

  /** A wide decimal (docs/contract.md, "Wide decimals") between two narrow fields, as the server lays it out. */
  static final String WIDE = "{\"version\": 1, \"null_bytes\": 8, \"fixed_size\": 40, \"variable\": false, \"fields\": ["
      + "{\"name\": \"n\", \"type\": \"decimal(18,2)\", \"offset\": 8, \"size\": 8, \"null_bit\": 0},"
      + "{\"name\": \"w\", \"type\": \"decimal(38,2)\", \"offset\": 16, \"size\": 16, \"null_bit\": 1},"
      + "{\"name\": \"i\", \"type\": \"int32\", \"offset\": 32, \"size\": 4, \"null_bit\": 2}]}";

  /** The 16 little-endian two's-complement bytes of {@code v} at {@code at}. */
  static void putI128(byte[] t, int at, BigInteger v) {
    byte[] be = v.toByteArray();
    byte fill = (byte) (v.signum() < 0 ? -1 : 0);
    for (int i = 0; i < 16; i++) t[at + i] = i < be.length ? be[be.length - 1 - i] : fill;
  }

  @Test
  void readsWideDecimalsOf16Bytes() {
    NtfLayout l = NtfLayout.fromJson(WIDE);
    assertEquals(16, l.field(1).size());
    assertTrue(l.field(1).type().isWideDecimal());
    NtfReader r = new NtfReader(l);
    byte[] t = new byte[40];
    Le.putI64(t, 8, -12345); // -123.45
    Le.putI32(t, 32, 7);
    BigInteger largest = BigInteger.TEN.pow(38).subtract(BigInteger.ONE);
    for (BigInteger v : List.of(largest, largest.negate(), BigInteger.valueOf(-1), BigInteger.ZERO,
        new BigInteger("170141183460469231731687303715884105"), BigInteger.ONE.shiftLeft(64))) {
      putI128(t, 16, v);
      assertEquals(v, r.getWideDecimal(t, 0, 1));
      assertEquals(new BigDecimal(v, 2), r.getBigDecimal(t, 0, 1));
    }
    assertEquals(new BigDecimal("-123.45"), r.getBigDecimal(t, 0, 0));
    assertEquals(7, r.getInt(t, 0, 2));
    putI128(t, 16, BigInteger.TEN.pow(38).negate());
    assertTrue(assertThrows(NtfFormatException.class, () -> r.getWideDecimal(t, 0, 1)).getMessage()
        .contains("decimal field w exceeds its precision"));
    byte[] frames = NtfWriter.frames(Arrays.copyOf(t, 40));
    putI128(frames, 4 + 16, largest.negate());
    NtfBatch batch = NtfBatch.index(r, frames, 0, frames.length);
    assertEquals(largest.negate(), batch.getWideDecimal(0, 1));
  }

  @Test
  void aWideDecimalFieldOfTheWrongSizeIsRejected() {
    String eight = WIDE.replace("\"offset\": 16, \"size\": 16", "\"offset\": 16, \"size\": 8");
    assertTrue(assertThrows(IllegalArgumentException.class, () -> NtfLayout.fromJson(eight)).getMessage()
        .contains("does not fit"));
  }

  @Test
  void aBatchIndexesFramesForColumnByColumnDecoding() {
    NtfLayout l = layout();
    NtfWriter w = new NtfWriter(l);
    byte[] a = w.setString(0, "x").setLong(3, 1).finish();
    byte[] b = w.setNull(0).setLong(3, 2).finish();
    byte[] c = w.setString(0, "zzz").setLong(3, 3).finish();
    byte[] frames = NtfWriter.frames(a, b, c);
    NtfBatch batch = NtfBatch.index(new NtfReader(l), frames, 0, frames.length);
    assertEquals(3, batch.size());
    long sum = 0;
    for (int row = 0; row < batch.size(); row++) sum += batch.getLong(row, 3);
    assertEquals(6, sum);
    assertEquals("x", batch.getString(0, 0));
    assertTrue(batch.isNull(1, 0));
    assertEquals("zzz", batch.getString(2, 0));
    assertEquals(3, batch.stringLength(2, 0));
  }

  @Test
  void aTupleShorterThanTheFixedPartIsCorrupt() {
    byte[] frames = NtfWriter.frames(new byte[16]);
    NtfFormatException e = assertThrows(NtfFormatException.class,
        () -> NtfBatch.index(new NtfReader(layout()), frames, 0, frames.length));
    assertTrue(e.getMessage().contains("below the layout's fixed size 64"), e.getMessage());
  }

  @Test
  void aFrameCursorRejectsTruncatedFrames() {
    byte[] frames = NtfWriter.frames(new byte[8], new byte[8]);
    FrameCursor c = new FrameCursor(frames, 0, frames.length - 3);
    assertTrue(c.next());
    assertEquals(4, c.tupleStart());
    assertEquals(8, c.tupleLength());
    NtfFormatException e = assertThrows(NtfFormatException.class, c::next);
    assertTrue(e.getMessage().contains("has length 8, 5 bytes left"), e.getMessage());
    FrameCursor d = new FrameCursor(frames, 0, 14);
    assertTrue(d.next());
    assertTrue(assertThrows(NtfFormatException.class, d::next).getMessage().contains("truncated frame"));
  }
}
