//! Store: SQLite schema, migrations, chunked records, the per-target serialization boundary (SPEC K3–K7).
