"""Spark's state schema files, bytes in, key and value schemas out (pure: no I/O).

Spark 4.2 writes the schema of a state store in one of three forms, each
starting with a Java ``writeUTF`` version string (2-byte length, modified UTF-8):

- ``v1`` (``state/<op>/0[/<store>]/_metadata/schema``): the key and the value
  schema's JSON, each one ``writeUTF`` string;
- ``v2`` (same place): each JSON split into chunks: a 4-byte count, then that
  many ``writeUTF`` strings (a JSON longer than 65535 bytes needs several);
- ``v3`` (``state/<op>/_stateSchema/<store>/<batch>_<uuid>``, transformWithState):
  a 4-byte number of column families, then per family its name (``writeUTF``),
  a 2-byte key schema id, the key JSON (chunks), a 2-byte value schema id, the
  value JSON (chunks), the key encoder spec JSON (chunks) and the user key
  encoder schema JSON (chunks; ``{    }`` when there is none).

(Read from Spark 4.2's ``SchemaHelper`` as compiled in its jar, and checked
against files Spark wrote; the schema ids are 4.2's, older sources lack them.)
A schema is shown the way Spark's ``simpleString`` names types:
``(user_id string, count bigint)``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

from airflow_kafka_stream.errors import CheckpointFormatError

#: A column: its name and its type as Spark's SQL names it (``bigint``, ``struct<a:int>``).
Field = tuple[str, str]
#: The column family of a store that has one (every operator but transformWithState).
DEFAULT_FAMILY = "default"
#: JSON type names whose SQL name differs.
SQL_NAMES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "null": "void"}


@dataclass(frozen=True)
class ColumnFamily:
    """One key/value pair of schemas of a state store: the store's only one, or a transformWithState variable."""

    name: str
    key: tuple[Field, ...]
    value: tuple[Field, ...]

    @property
    def internal(self) -> bool:
        """Spark's own bookkeeping families (``$rowCounter_...``, ``$ttl_...``), not a user's state variable."""
        return self.name.startswith("$")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "key_schema": schema_text(self.key), "value_schema": schema_text(self.value),
                "key": [list(f) for f in self.key], "value": [list(f) for f in self.value]}


def schema_text(fields: tuple[Field, ...]) -> str:
    """``(user_id string, count bigint)``; ``()`` for an empty schema."""
    return "(" + ", ".join(f"{name} {kind}" for name, kind in fields) + ")"


def type_text(kind: Any) -> str:
    """A Spark JSON data type as its SQL name: ``long`` → ``bigint``, a struct → ``struct<a:int,b:string>``."""
    if isinstance(kind, str):
        return SQL_NAMES.get(kind, kind)
    if not isinstance(kind, dict):
        return str(kind)
    shape = kind.get("type")
    if shape == "struct":
        return "struct<" + ",".join(f"{name}:{inner}" for name, inner in struct_fields(kind)) + ">"
    if shape == "array":
        return f"array<{type_text(kind.get('elementType'))}>"
    if shape == "map":
        return f"map<{type_text(kind.get('keyType'))},{type_text(kind.get('valueType'))}>"
    if shape == "udt":
        return type_text(kind.get("sqlType"))
    return str(shape)


def struct_fields(struct_json: Any) -> tuple[Field, ...]:
    """The columns of a StructType's JSON form."""
    if not isinstance(struct_json, dict) or struct_json.get("type") != "struct":
        raise ValueError(f"not a struct type: {str(struct_json)[:80]}")
    return tuple((str(f.get("name")), type_text(f.get("type"))) for f in struct_json.get("fields") or ())


def parse_struct(text: str) -> tuple[Field, ...]:
    """The columns of a StructType given as JSON text."""
    return struct_fields(json.loads(text))


class _Reader:
    """Java ``DataInputStream`` reads over bytes: big-endian ints and ``writeUTF`` strings."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise ValueError(f"file ends at byte {len(self.data)}, {size} more bytes expected at {self.at}")
        chunk = self.data[self.at:self.at + size]
        self.at += size
        return chunk

    def short(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int(self) -> int:
        value = struct.unpack(">i", self.take(4))[0]
        if value < 0:
            raise ValueError(f"negative count {value} at byte {self.at - 4}")
        return value

    def utf(self) -> str:
        size = struct.unpack(">H", self.take(2))[0]
        return java_utf(self.take(size))

    def chunks(self) -> str:
        return "".join(self.utf() for _ in range(self.int()))


def java_utf(raw: bytes) -> str:
    """Java's modified UTF-8: NUL as ``C0 80`` and characters past U+FFFF as two encoded surrogates."""
    text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    return text.encode("utf-16", "surrogatepass").decode("utf-16")


def schema_version(data: bytes) -> int:
    """The version a schema file starts with (``v1``, ``v2`` or ``v3``)."""
    try:
        head = _Reader(data).utf()
    except (ValueError, UnicodeError):
        head = ""
    if not head.startswith("v") or not head[1:].isdigit():
        raise CheckpointFormatError("not a Spark state schema file (no version at its start)")
    return int(head[1:])


def parse_schema_file(data: bytes, where: str = "schema file") -> tuple[ColumnFamily, ...]:
    """The column families a state schema file (v1, v2 or v3) holds; CheckpointFormatError when unreadable."""
    version = schema_version(data)
    reader = _Reader(data)
    reader.utf()
    try:
        if version == 1:
            return (ColumnFamily(DEFAULT_FAMILY, parse_struct(reader.utf()), parse_struct(reader.utf())),)
        if version == 2:
            return (ColumnFamily(DEFAULT_FAMILY, parse_struct(reader.chunks()), parse_struct(reader.chunks())),)
        if version == 3:
            families = []
            for _ in range(reader.int()):
                name = reader.utf()
                reader.short()  # key schema id (Avro schema evolution)
                key = parse_struct(reader.chunks())
                reader.short()  # value schema id
                value = parse_struct(reader.chunks())
                reader.chunks()  # key encoder spec
                reader.chunks()  # user key encoder schema
                families.append(ColumnFamily(name, key, value))
            return tuple(families)
    except (ValueError, UnicodeError) as exc:  # json.JSONDecodeError is a ValueError
        raise CheckpointFormatError(f"{where}: unreadable schema (v{version}): {exc}") from exc
    raise CheckpointFormatError(f"{where}: schema format v{version} is newer than this tool reads (v1 to v3)")
