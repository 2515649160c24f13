package io.jumpgate.trino;

import io.airlift.slice.Slice;
import io.airlift.slice.Slices;
import io.jumpgate.core.ntf.NtfBatch;
import io.jumpgate.core.ntf.NtfLayout;
import io.jumpgate.core.ntf.NtfReader;
import io.jumpgate.core.request.ContractType;
import io.trino.spi.Page;
import io.trino.spi.block.Block;
import io.trino.spi.block.ByteArrayBlock;
import io.trino.spi.block.Int128ArrayBlock;
import io.trino.spi.block.IntArrayBlock;
import io.trino.spi.block.LongArrayBlock;
import io.trino.spi.block.VariableWidthBlock;
import io.trino.spi.type.BigintType;
import io.trino.spi.type.BooleanType;
import io.trino.spi.type.DateType;
import io.trino.spi.type.DecimalType;
import io.trino.spi.type.DoubleType;
import io.trino.spi.type.IntegerType;
import io.trino.spi.type.Type;
import io.trino.spi.type.VarcharType;

import java.math.BigInteger;
import java.util.List;
import java.util.Optional;

/**
 * Turns NTF tuples of one layout into Trino pages, one column at a time: for each output column a
 * {@link ColumnDecoder} chosen once for the pair (NTF field type, Trino type) walks the batch's
 * tuples and fills a primitive array (long[], int[], byte[], or the bytes and offsets of a
 * VariableWidthBlock) and a null vector, which become the block. No value is boxed.
 *
 * <p>Conversions, where the contract's result type differs from the one Trino planned: a wider or
 * narrower integer, a decimal (8 bytes, or a wide one of 16) to Trino's long decimal (Int128) or to
 * another scale, an integer to a decimal or double. Anything else is refused when the decoder is made, before a row is read.
 */
public final class NtfPageDecoder {
    private final NtfReader reader;
    private final ColumnDecoder[] columns;

    public NtfPageDecoder(NtfLayout layout, List<JumpgateColumnHandle> wanted) {
        this.reader = new NtfReader(layout);
        if (!wanted.isEmpty() && layout.size() != wanted.size()) {
            throw new IllegalArgumentException("the NTF layout has " + layout.size() + " fields, " + wanted.size() + " columns were asked for");
        }
        columns = new ColumnDecoder[wanted.size()];
        for (int f = 0; f < wanted.size(); f++) {
            columns[f] = decoder(f, layout.field(f).type(), wanted.get(f));
        }
    }

    /** Rows {@code [from, from + count)} of the batch as a page. */
    public Page decode(NtfBatch batch, int from, int count) {
        if (columns.length == 0) {
            return new Page(count);
        }
        Block[] blocks = new Block[columns.length];
        for (int c = 0; c < columns.length; c++) {
            blocks[c] = columns[c].decode(batch, from, count);
        }
        return new Page(count, blocks);
    }

    interface ColumnDecoder {
        Block decode(NtfBatch batch, int from, int count);
    }

    private ColumnDecoder decoder(int f, ContractType ntf, JumpgateColumnHandle col) {
        Type t = col.type();
        ContractType.Kind k = ntf.kind();
        boolean integral = k == ContractType.Kind.INT32 || k == ContractType.Kind.INT64;
        if (t instanceof BooleanType && k == ContractType.Kind.BOOLEAN) {
            return (b, from, n) -> {
                byte[] v = new byte[n];
                boolean[] nulls = new boolean[n];
                boolean any = false;
                byte[] buf = b.buffer();
                for (int i = 0; i < n; i++) {
                    int tu = b.tupleStart(from + i);
                    if (reader.isNull(buf, tu, f)) {
                        nulls[i] = any = true;
                    } else {
                        v[i] = reader.getBoolean(buf, tu, f) ? (byte) 1 : 0;
                    }
                }
                return new ByteArrayBlock(n, any ? Optional.of(nulls) : Optional.empty(), v);
            };
        }
        if ((t instanceof IntegerType && integral) || (t instanceof DateType && k == ContractType.Kind.DATE)) {
            boolean wide = k == ContractType.Kind.INT64;
            return (b, from, n) -> {
                int[] v = new int[n];
                boolean[] nulls = new boolean[n];
                boolean any = false;
                byte[] buf = b.buffer();
                for (int i = 0; i < n; i++) {
                    int tu = b.tupleStart(from + i);
                    if (reader.isNull(buf, tu, f)) {
                        nulls[i] = any = true;
                    } else {
                        v[i] = wide ? Math.toIntExact(reader.getLong(buf, tu, f)) : reader.getInt(buf, tu, f);
                    }
                }
                return new IntArrayBlock(n, any ? Optional.of(nulls) : Optional.empty(), v);
            };
        }
        if (t instanceof BigintType && integral) {
            return longs(f, k == ContractType.Kind.INT32 ? LongGetter.INT : LongGetter.LONG, 0);
        }
        if (t instanceof DoubleType && k == ContractType.Kind.FLOAT64) {
            return longs(f, LongGetter.DOUBLE_BITS, 0);
        }
        if (t instanceof DoubleType && integral) {
            return longs(f, k == ContractType.Kind.INT32 ? LongGetter.INT_AS_DOUBLE : LongGetter.LONG_AS_DOUBLE, 0);
        }
        if (t instanceof DecimalType d && ntf.isWideDecimal()) {
            // a wide decimal (19..38 digits: 16 bytes) becomes Trino's long decimal, Int128
            if (d.isShort() || d.getScale() < ntf.scale()) {
                throw new IllegalArgumentException("column " + col.name() + ": Jumpgate sends " + ntf + ", Trino wants " + t);
            }
            return wide(f, d.getScale() - ntf.scale(), d.getPrecision(), col.name());
        }
        if (t instanceof DecimalType d && (k == ContractType.Kind.DECIMAL || integral)) {
            int from = k == ContractType.Kind.DECIMAL ? ntf.scale() : 0;
            if (d.getScale() < from) {
                throw new IllegalArgumentException("column " + col.name() + ": Jumpgate sends " + ntf + ", Trino wants " + t);
            }
            long factor = NtfReader.pow10(d.getScale() - from);
            LongGetter g = k == ContractType.Kind.DECIMAL ? LongGetter.DECIMAL : k == ContractType.Kind.INT32 ? LongGetter.INT : LongGetter.LONG;
            return d.isShort() ? longs(f, g, factor) : int128(f, g, factor);
        }
        if (t instanceof VarcharType && k == ContractType.Kind.STRING) {
            return (b, from, n) -> strings(b, f, from, n);
        }
        throw new IllegalArgumentException("column " + col.name() + ": Jumpgate sends " + ntf + ", which cannot become Trino's " + t);
    }

    private enum LongGetter { LONG, INT, DECIMAL, DOUBLE_BITS, INT_AS_DOUBLE, LONG_AS_DOUBLE }

    private long get(LongGetter g, byte[] buf, int tu, int f) {
        return switch (g) {
            case LONG -> reader.getLong(buf, tu, f);
            case INT -> reader.getInt(buf, tu, f);
            case DECIMAL -> reader.getDecimal(buf, tu, f);
            case DOUBLE_BITS -> Double.doubleToRawLongBits(reader.getDouble(buf, tu, f));
            case INT_AS_DOUBLE -> Double.doubleToRawLongBits(reader.getInt(buf, tu, f));
            case LONG_AS_DOUBLE -> Double.doubleToRawLongBits((double) reader.getLong(buf, tu, f));
        };
    }

    private ColumnDecoder longs(int f, LongGetter g, long factor) {
        return (b, from, n) -> {
            long[] v = new long[n];
            boolean[] nulls = new boolean[n];
            boolean any = false;
            byte[] buf = b.buffer();
            for (int i = 0; i < n; i++) {
                int tu = b.tupleStart(from + i);
                if (reader.isNull(buf, tu, f)) {
                    nulls[i] = any = true;
                } else {
                    long x = get(g, buf, tu, f);
                    v[i] = factor > 1 ? Math.multiplyExact(x, factor) : x;
                }
            }
            return new LongArrayBlock(n, any ? Optional.of(nulls) : Optional.empty(), v);
        };
    }

    /** Sets row {@code i}'s Int128 words, {@code v[2 i]} (high) and {@code v[2 i + 1]} (low), from the tuple at {@code tu}. */
    private interface Int128Getter {
        void get(byte[] buf, int tu, long[] v, int i);
    }

    private ColumnDecoder int128(int f, Int128Getter g) {
        return (b, from, n) -> {
            long[] v = new long[2 * n];
            boolean[] nulls = new boolean[n];
            boolean any = false;
            byte[] buf = b.buffer();
            for (int i = 0; i < n; i++) {
                int tu = b.tupleStart(from + i);
                if (reader.isNull(buf, tu, f)) {
                    nulls[i] = any = true;
                } else {
                    g.get(buf, tu, v, i);
                }
            }
            return new Int128ArrayBlock(n, any ? Optional.of(nulls) : Optional.empty(), v);
        };
    }

    /** An integer or 8-byte decimal as Int128 words, times {@code factor}. */
    private ColumnDecoder int128(int f, LongGetter g, long factor) {
        return int128(f, (buf, tu, v, i) -> {
            long x = get(g, buf, tu, f);
            if (factor > 1) {
                x = Math.multiplyExact(x, factor); // 18 digits times a small power of ten stays in a long here
            }
            v[2 * i] = x >> 63; // high word: the sign extension
            v[2 * i + 1] = x;
        });
    }

    /** 16-byte decimals as Int128 words, rescaled by 10^{@code up} (checked against Trino's precision). */
    private ColumnDecoder wide(int f, int up, int precision, String name) {
        BigInteger factor = BigInteger.TEN.pow(up);
        BigInteger limit = BigInteger.TEN.pow(precision);
        return int128(f, (buf, tu, v, i) -> {
            BigInteger x = reader.getWideDecimal(buf, tu, f); // checked against the field's precision
            if (up > 0) {
                x = x.multiply(factor);
                if (x.abs().compareTo(limit) >= 0) {
                    throw new IllegalArgumentException("column " + name + ": " + x + " does not fit decimal(" + precision + ")");
                }
            }
            v[2 * i] = x.shiftRight(64).longValue(); // high word
            v[2 * i + 1] = x.longValue(); // low word
        });
    }

    private Block strings(NtfBatch b, int f, int from, int n) {
        byte[] buf = b.buffer();
        int[] offsets = new int[n + 1];
        boolean[] nulls = new boolean[n];
        boolean any = false;
        int total = 0;
        for (int i = 0; i < n; i++) {
            int tu = b.tupleStart(from + i);
            if (reader.isNull(buf, tu, f)) {
                nulls[i] = any = true;
            } else {
                total += reader.stringLength(buf, tu, f);
            }
            offsets[i + 1] = total;
        }
        byte[] data = new byte[total];
        for (int i = 0; i < n; i++) {
            int len = offsets[i + 1] - offsets[i];
            if (len > 0) {
                int tu = b.tupleStart(from + i);
                int at = reader.stringOffset(buf, tu, b.tupleLength(from + i), f);
                System.arraycopy(buf, at, data, offsets[i], len);
            }
        }
        Slice slice = Slices.wrappedBuffer(data);
        return new VariableWidthBlock(n, slice, offsets, any ? Optional.of(nulls) : Optional.empty());
    }
}
