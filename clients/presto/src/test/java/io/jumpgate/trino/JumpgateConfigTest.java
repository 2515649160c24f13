package io.jumpgate.trino;

import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class JumpgateConfigTest {
    @Test
    void dataSizesAreInPowersOf1024() {
        assertEquals(16L << 20, JumpgateConfig.bytes("16MB", "k"));
        assertEquals(512L << 10, JumpgateConfig.bytes("512kB", "k"));
        assertEquals(3L << 29, JumpgateConfig.bytes("1.5GB", "k"));
        assertEquals(0, JumpgateConfig.bytes("0", "k"));
        assertEquals(100, JumpgateConfig.bytes("100B", "k"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> JumpgateConfig.bytes("16 parsecs", "k"));
        assertTrue(e.getMessage().startsWith("k must be a data size"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> JumpgateConfig.bytes("MB", "k"));
    }

    @Test
    void theDynamicFilterMinimumTableSizeDefaultsTo16MB() {
        assertEquals(16L << 20, JumpgateConfig.from(Map.of("jumpgate.data-root", "/data")).dynamicFilterMinBytes());
        assertEquals(0, JumpgateConfig.from(Map.of("jumpgate.data-root", "/data", "jumpgate.dynamic-filtering.min-table-size", "0"))
                .dynamicFilterMinBytes());
    }
}
