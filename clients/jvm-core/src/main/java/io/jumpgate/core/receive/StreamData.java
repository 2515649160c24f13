package io.jumpgate.core.receive;

import java.util.List;

/** One NTF stream, complete and checked (header, lengths, end marker and count). */
public record StreamData(int id, List<Chunk> chunks, long tuples, long bytes) {}
