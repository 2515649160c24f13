package io.jumpgate.trino;

import org.junit.jupiter.api.Test;

import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;

class RequestBuilderTest {
    @Test
    void identifiersAreTheQuotedNamesOutsideStringLiterals() {
        assertEquals(Set.of("l_orderkey", "o_orderkey"), RequestBuilder.identifiers("(\"l_orderkey\" = \"o_orderkey\")"));
        assertEquals(Set.of("a\"b"), RequestBuilder.identifiers("\"a\"\"b\" > 3"));
        // A double quote inside a string literal is not a column; a doubled single quote stays inside it.
        assertEquals(Set.of("c"), RequestBuilder.identifiers("\"c\" LIKE '%\"x\"%' OR \"c\" = 'it''s \"y\"'"));
        assertEquals(Set.of(), RequestBuilder.identifiers(null));
        assertEquals(Set.of(), RequestBuilder.identifiers("TRUE"));
    }
}
