package io.jumpgate.trino;

import io.jumpgate.core.ntf.NtfBatch;
import io.jumpgate.core.ntf.NtfLayout;
import io.jumpgate.core.ntf.NtfReader;
import io.jumpgate.core.ntf.NtfWriter;
import io.trino.spi.Page;
import io.trino.spi.type.DecimalType;
import io.trino.spi.type.Int128;
import org.junit.jupiter.api.Test;

import java.math.BigInteger;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Wide decimals (16 bytes, 19..38 digits: what a pushed sum of a decimal returns) as Trino's long decimals. */
class NtfPageDecoderTest {
    private static final NtfLayout LAYOUT = NtfLayout.fromJson("{\"version\": 1, \"null_bytes\": 8, \"fixed_size\": 24, "
            + "\"variable\": false, \"fields\": [{\"name\": \"s\", \"type\": \"decimal(38,2)\", \"offset\": 8, "
            + "\"size\": 16, \"null_bit\": 0}]}");
    private static final BigInteger BIG = new BigInteger("1234567890123456789012345678901234567"); // 37 digits
    private static final List<BigInteger> VALUES = List.of(BIG, BIG.negate(), BigInteger.valueOf(-5), BigInteger.ZERO);

    private static NtfBatch batch(List<BigInteger> values, boolean withNull) {
        NtfWriter w = new NtfWriter(LAYOUT);
        byte[][] tuples = new byte[values.size() + (withNull ? 1 : 0)][];
        for (int i = 0; i < values.size(); i++) {
            tuples[i] = w.setWideDecimal(0, values.get(i)).finish();
        }
        if (withNull) {
            tuples[values.size()] = w.setNull(0).finish();
        }
        byte[] buf = NtfWriter.frames(tuples);
        return NtfBatch.index(new NtfReader(LAYOUT), buf, 0, buf.length);
    }

    private static Page decode(DecimalType type, NtfBatch b) {
        NtfPageDecoder d = new NtfPageDecoder(LAYOUT, List.of(new JumpgateColumnHandle("s", type, "\"s\"", false)));
        return d.decode(b, 0, b.size());
    }

    @Test
    void wideDecimalsBecomeInt128sBothSignsAndNull() {
        DecimalType t = DecimalType.createDecimalType(38, 2);
        Page p = decode(t, batch(VALUES, true));
        for (int i = 0; i < VALUES.size(); i++) {
            assertEquals(Int128.valueOf(VALUES.get(i)), t.getObject(p.getBlock(0), i), "row " + i);
        }
        assertTrue(p.getBlock(0).isNull(VALUES.size()));
    }

    @Test
    void aLargerTrinoScaleRescalesAndAValueBeyondItsPrecisionFails() {
        DecimalType t = DecimalType.createDecimalType(38, 4);
        Page p = decode(t, batch(List.of(BigInteger.valueOf(-123456)), false));
        assertEquals(Int128.valueOf(-12345600), t.getObject(p.getBlock(0), 0));
        // 37 digits times 100 is 39: beyond decimal(38,4)
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> decode(t, batch(List.of(BIG), false)));
        assertTrue(e.getMessage().contains("does not fit decimal(38)"), e.getMessage());
    }

    @Test
    void aWideDecimalIsNeverMadeAShortOne() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> decode(DecimalType.createDecimalType(18, 2), batch(VALUES, false)));
        assertTrue(e.getMessage().contains("Trino wants decimal(18,2)"), e.getMessage());
    }
}
