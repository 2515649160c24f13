"""Tools for testing Jumpgate under conditions the machine does not give by itself: `udp_relay`, a
lossy UDP relay that drops, duplicates and reorders datagrams on a path between two addresses."""
