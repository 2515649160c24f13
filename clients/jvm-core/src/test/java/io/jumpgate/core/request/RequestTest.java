package io.jumpgate.core.request;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.math.BigDecimal;
import java.time.LocalDate;
import java.util.List;
import java.util.Optional;

import org.junit.jupiter.api.Test;

class RequestTest {
  @Test
  void writesOperationsInOrder() {
    Request r = new Request("q1", List.of(
        Ops.read("scan", List.of("t/a.json"), "json", List.of(Ops.column("a", "int64"), Ops.column("s", "string"))),
        Ops.filter("f", "scan", "\"a\" > 3 AND \"s\" LIKE " + Expr.quote("it's%")),
        Ops.project("p", "f", List.of(Ops.expr("c0", Expr.cast(Expr.ident("a"), ContractType.decimal(12, 2))))),
        Ops.send("out", "p", "127.0.0.1", 4000)));
    assertEquals("{\"name\":\"q1\",\"operations\":["
        + "{\"kind\":\"read\",\"name\":\"scan\",\"path\":[\"t/a.json\"],\"format\":\"json\","
        + "\"schema\":[{\"name\":\"a\",\"type\":\"int64\"},{\"name\":\"s\",\"type\":\"string\"}]},"
        + "{\"kind\":\"filter\",\"name\":\"f\",\"input\":\"scan\",\"condition\":\"\\\"a\\\" > 3 AND \\\"s\\\" LIKE 'it''s%'\"},"
        + "{\"kind\":\"project\",\"name\":\"p\",\"input\":\"f\",\"columns\":[{\"name\":\"c0\",\"expr\":\"CAST(\\\"a\\\" AS decimal(12,2))\"}]},"
        + "{\"kind\":\"send\",\"name\":\"out\",\"input\":\"p\",\"transport\":\"tcp\",\"host\":\"127.0.0.1\",\"port\":4000}]}",
        r.toJson());
  }

  @Test
  void renamesKeepShuffleIndexes() {
    Op send = Ops.send("out", "spread[2]", "h", 1).renamed(n -> n + "_g0");
    assertEquals("out_g0", send.name());
    assertEquals("spread_g0[2]", send.inputs().get("input"));
    Op moved = send.withField("port", 9);
    assertEquals("{\"kind\":\"send\",\"name\":\"out_g0\",\"input\":\"spread_g0[2]\",\"transport\":\"tcp\",\"host\":\"h\",\"port\":9}",
        moved.toJson());
  }

  @Test
  void jsonValues() {
    assertEquals("[null,true,1,2.5,\"a\\nb\\u0001\",1.50,{\"k\":[]},3]",
        Json.write(List.of(Optional.empty(), true, 1L, 2.5, "a\nb\u0001", new BigDecimal("1.50"),
            JsonObject.of("k", List.of()), new RawJson("3"))).replace("[null", "[null"));
    assertThrows(IllegalArgumentException.class, () -> Json.write(new Object()));
    assertThrows(IllegalArgumentException.class, () -> Json.write(Double.NaN));
    assertEquals("DATE '1997-05-19'", Expr.dateOfEpochDay(10_000));
    assertEquals("DATE '2000-01-01'", Expr.date(LocalDate.of(2000, 1, 1)));
  }

  @Test
  void contractTypes() {
    assertEquals(ContractType.INT32, ContractType.parse("INT32"));
    assertEquals(ContractType.decimal(18, 0), ContractType.parse("decimal( 18 , 0 )"));
    assertEquals(8, ContractType.parse("string").ntfSize());
    assertEquals(4, ContractType.DATE.ntfSize());
    assertThrows(IllegalArgumentException.class, () -> ContractType.decimal(39, 2));
    assertThrows(IllegalArgumentException.class, () -> ContractType.decimal(0, 0));
    assertEquals(8, ContractType.decimal(18, 2).ntfSize());
    assertEquals(16, ContractType.decimal(19, 2).ntfSize()); // a wide decimal
    assertTrue(ContractType.parse("decimal(38,38)").isWideDecimal());
    assertFalse(ContractType.decimal(18, 2).isWideDecimal());
    assertThrows(IllegalArgumentException.class, () -> ContractType.parse("varchar"));
  }

  @Test
  void requestsSerialize() throws Exception {
    Request r = new Request("x", List.of(Ops.project("p", "s", List.of(Ops.expr("a", "1")))));
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
      out.writeObject(r);
    }
    Object back = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray())).readObject();
    assertEquals(r, back);
    assertEquals(r.toJson(), ((Request) back).toJson());
  }
}
