package io.jumpgate.core.request;

import java.io.Serializable;

/** JSON text written as is into a request (already valid JSON, e.g. a nested array built elsewhere). */
public record RawJson(String text) implements Serializable {}
