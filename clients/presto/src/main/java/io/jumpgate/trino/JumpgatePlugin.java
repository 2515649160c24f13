package io.jumpgate.trino;

import io.trino.spi.Plugin;
import io.trino.spi.connector.ConnectorFactory;

import java.util.List;

/** The Trino plugin: one connector, named {@code jumpgate} (etc/catalog/NAME.properties:
 *  {@code connector.name=jumpgate}). Found by Trino through META-INF/services. */
public final class JumpgatePlugin implements Plugin {
    @Override
    public Iterable<ConnectorFactory> getConnectorFactories() {
        return List.of(new JumpgateConnectorFactory());
    }
}
