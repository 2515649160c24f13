"""Generated JSON Lines data for end-to-end tests: every contract type, NULLs and missing fields
everywhere, unicode and hostile text, and a DuckDB view over the same file as the oracle."""
from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

EPOCH = dt.date(1970, 1, 1)
HOSTILE_S = "'); system(\"id\"); //"
HOSTILE_I = "\"; */ #include"

# (name, contract type, DuckDB type)
ALL_TYPES = [
    ("id", "int64", "BIGINT"),
    ("a", "int32", "INTEGER"),
    ("b", "int64", "BIGINT"),
    ("x", "float64", "DOUBLE"),
    ("d", "decimal(12,2)", "DECIMAL(12,2)"),
    ("s", "string", "VARCHAR"),
    ("dt", "date", "DATE"),
    ("flag", "boolean", "BOOLEAN"),
    (HOSTILE_S, "string", "VARCHAR"),
    (HOSTILE_I, "int32", "INTEGER"),
]
WORDS = ["alpha", "beta", "gamma", "Delta", "abacus", "abc", "zeta", "O'Neil", "naïve", "", "x%y",
         "under_score", "Ab", "ab", "ÀÉÎ straße", "日本語", "tab\there", "quote\"d", "back\\slash",
         "'); system(\"id\"); //", "\"; */ #include <stdio.h>"]


def schema_json() -> list[dict]:
    return [{"name": n, "type": t} for n, t, _ in ALL_TYPES]


def write_all_types(path: Path, rows: int, seed: int = 1) -> Path:
    rnd = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            def maybe(v):
                return None if rnd.random() < 0.12 else v
            rec = {
                "id": i,
                "a": maybe(rnd.randint(-1000, 1000)),
                "b": maybe(rnd.randint(-10**12, 10**12)),
                "x": maybe(rnd.uniform(-1, 1) * 1000),
                "d": maybe(rnd.choice([f"{rnd.randint(-99999999, 99999999) / 100:.2f}",
                                       rnd.randint(-99999999, 99999999) / 100])),
                "s": maybe(rnd.choice(WORDS) + (str(rnd.randint(0, 99)) if rnd.random() < 0.3 else "")),
                "dt": maybe((EPOCH + dt.timedelta(days=rnd.randint(-3000, 20000))).isoformat()),
                "flag": maybe(rnd.random() < 0.5),
                HOSTILE_S: maybe(rnd.choice(WORDS)),
                HOSTILE_I: maybe(rnd.randint(-5, 5)),
            }
            # some NULLs are explicit, some are missing fields
            rec = {k: v for k, v in rec.items() if v is not None or rnd.random() < 0.5}
            f.write(json.dumps(rec, ensure_ascii=rnd.random() < 0.5) + "\n")
    return path


def duck_view(con, name: str, path: Path, columns=ALL_TYPES) -> None:
    def q(s: str) -> str:
        return s.replace("'", "''")
    cols = ", ".join(f"'{q(n)}': '{t}'" for n, _, t in columns)
    con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_json('{q(str(path))}', "
                f"format='newline_delimited', columns={{{cols}}})")
