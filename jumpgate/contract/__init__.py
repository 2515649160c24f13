"""The wire contract as code (docs/contract.md): what crosses a process boundary. Value types
(`types`), NTF layouts (`ntf`), TCP stream framing (`tcp`), UDP framing (`udp`), and the errors
the contract names (`errors`). It imports nothing else of Jumpgate, so the client, the compiler,
the runtime and every NCA plugin build on the same definitions and none of them on each other."""
