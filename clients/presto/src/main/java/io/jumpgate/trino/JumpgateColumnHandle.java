package io.jumpgate.trino;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.connector.ColumnMetadata;
import io.trino.spi.type.Type;

/**
 * A column of a Jumpgate table handle: a base column of the dataset, a projection pushed into
 * Jumpgate ({@code expr} over the base columns), or an output of a pushed aggregation ({@code expr}
 * names that output). {@code name} is the name in the job's output; {@code expr} is in the
 * contract's expression syntax.
 */
public record JumpgateColumnHandle(
        @JsonProperty("name") String name,
        @JsonProperty("type") Type type,
        @JsonProperty("expr") String expr,
        @JsonProperty("synthetic") boolean synthetic) implements ColumnHandle {

    @JsonCreator
    public JumpgateColumnHandle {}

    public static JumpgateColumnHandle base(String name, Type type) {
        return new JumpgateColumnHandle(name, type, Sql.ident(name), false);
    }

    public ColumnMetadata metadata() {
        return ColumnMetadata.builder().setName(name).setType(type).setNullable(true).setHidden(synthetic).build();
    }

    @Override
    public String toString() {
        return synthetic ? name + ":=" + expr : name;
    }
}
