package io.jumpgate.trino;

import io.trino.spi.connector.Connector;
import io.trino.spi.connector.ConnectorContext;
import io.trino.spi.connector.ConnectorFactory;

import java.util.Map;

public final class JumpgateConnectorFactory implements ConnectorFactory {
    @Override
    public String getName() {
        return "jumpgate";
    }

    @Override
    public Connector create(String catalogName, Map<String, String> config, ConnectorContext context) {
        return new JumpgateConnector(catalogName, JumpgateConfig.from(config), context.getNodeManager());
    }
}
