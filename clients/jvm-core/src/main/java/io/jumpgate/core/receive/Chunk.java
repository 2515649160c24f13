package io.jumpgate.core.receive;

/**
 * Frames of one stream, as received: {@code bytes[0, end)} holds {@code tuples} whole
 * {@code [u32 length][tuple]} frames (contract section 3). A frame never straddles two chunks, so
 * decoders walk each chunk in place ({@link io.jumpgate.core.ntf.FrameCursor},
 * {@link io.jumpgate.core.ntf.NtfBatch}) without copying.
 */
public record Chunk(byte[] bytes, int end, int tuples) {}
