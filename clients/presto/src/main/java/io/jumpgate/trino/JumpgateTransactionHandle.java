package io.jumpgate.trino;

import io.trino.spi.connector.ConnectorTransactionHandle;

/** Read-only connector: one stateless transaction. */
public enum JumpgateTransactionHandle implements ConnectorTransactionHandle {
    INSTANCE
}
