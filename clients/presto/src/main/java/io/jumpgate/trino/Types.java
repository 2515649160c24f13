package io.jumpgate.trino;

import io.trino.spi.type.BigintType;
import io.trino.spi.type.BooleanType;
import io.trino.spi.type.DateType;
import io.trino.spi.type.DecimalType;
import io.trino.spi.type.DoubleType;
import io.trino.spi.type.IntegerType;
import io.trino.spi.type.Type;
import io.trino.spi.type.VarcharType;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Contract types (contract §1 "Types") ↔ Trino types. */
public final class Types {
    private static final Pattern DECIMAL = Pattern.compile("decimal\\((\\d+),\\s*(\\d+)\\)");

    private Types() {}

    public static Type trino(String contract) {
        switch (contract) {
            case "boolean": return BooleanType.BOOLEAN;
            case "int32": return IntegerType.INTEGER;
            case "int64": return BigintType.BIGINT;
            case "float64": return DoubleType.DOUBLE;
            case "string": return VarcharType.VARCHAR;
            case "date": return DateType.DATE;
            default:
                Matcher m = DECIMAL.matcher(contract);
                if (m.matches()) {
                    return DecimalType.createDecimalType(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)));
                }
                throw new IllegalArgumentException("contract type " + contract + " has no Trino type");
        }
    }
}
