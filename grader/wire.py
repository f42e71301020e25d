"""The parent-child wire format: a JSON header and raw tensor bytes, never a pickle.

A frame is two little-endian lengths, a JSON header and a blob; the header describes each value as a tensor
(dtype, shape, byte range in the blob), an int, a dict of them, or by its type name only. The parent treats
every byte from a child as hostile: lengths, nesting, field types, value counts and byte ranges are all
bounded, and a frame that breaks any rule raises `WireError`, which the caller turns into a student's error.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import struct

import torch

MAX_HEADER = 1 << 20  # 1 MiB of JSON
MAX_BLOB = 64 << 20  # 64 MiB of tensor bytes in one frame
MAX_VALUES = 256  # tensors and ints described by one frame
MAX_ITEMS = 128  # entries of any list or map in a header
MAX_STR = 4000  # characters of any string in a header
MAX_DIMS = 8
_LENGTHS = struct.Struct("<II")
PREFIX_SIZE = _LENGTHS.size

DTYPES = {
    str(dt).removeprefix("torch."): dt
    for dt in (
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
    )
}
_ITEMSIZE = {name: torch.empty((), dtype=dt).element_size() for name, dt in DTYPES.items()}


class WireError(ValueError):
    """A frame from a child that does not follow the wire format."""


def _type_name(value) -> str:
    cls = type(value)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", "?")
    return name if module == "builtins" else f"{module}.{name}"


def tensor_bytes(t: torch.Tensor):
    """Return a tensor's bytes as a buffer, without a copy when the tensor is contiguous on the CPU."""
    t = t.detach()
    if t.device.type != "cpu" or not t.is_contiguous():
        t = t.to("cpu").contiguous()
    if t.numel() == 0:
        return b""
    try:
        return memoryview(t.numpy()).cast("B")
    except (TypeError, RuntimeError):  # a dtype numpy lacks (bfloat16)
        return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


def digest(t: torch.Tensor) -> str:
    """Return a digest of a tensor's dtype, shape and bytes (for checking inputs after a call)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{t.dtype}|{tuple(t.shape)}|".encode())
    h.update(tensor_bytes(t))
    return h.hexdigest()


class Encoder:
    """Turn values into a JSON-able description plus the tensor bytes, kept as zero-copy views where possible."""

    def __init__(self):
        self.parts: list = []
        self.size = 0

    def value(self, v, depth: int = 0) -> dict:
        """Describe one value; tensors keep their bytes, a dict of tensors recurses one level."""
        if isinstance(v, torch.Tensor):
            data = tensor_bytes(v)
            desc = {
                "kind": "tensor",
                "dtype": str(v.dtype).removeprefix("torch."),
                "shape": list(v.shape),
                "offset": self.size,
                "nbytes": len(data),
                "requires_grad": bool(v.requires_grad),
                "grad_fn": v.grad_fn is not None,
            }
            self.parts.append(data)
            self.size += len(data)
            return desc
        if isinstance(v, int) and not isinstance(v, bool):
            return {"kind": "int", "value": v}
        if isinstance(v, dict) and depth == 0:
            return {"kind": "dict", "items": {str(k): self.value(x, depth + 1) for k, x in v.items()}}
        return {"kind": "other", "type": _type_name(v)}

    def blob(self) -> bytes:
        """Return the concatenated tensor bytes."""
        return b"".join(self.parts)


def pack(header: dict, blob: bytes = b"") -> bytes:
    """Return one frame."""
    head = json.dumps(header).encode()
    return _LENGTHS.pack(len(head), len(blob)) + head + blob


def pack_parts(header: dict, parts: list) -> list:
    """Return one frame as a list of buffers: prefix and header, then each tensor's bytes uncopied."""
    head = json.dumps(header).encode()
    return [_LENGTHS.pack(len(head), sum(len(p) for p in parts)) + head, *parts]


def read_lengths(prefix: bytes) -> tuple[int, int]:
    """Parse and bound the two lengths at the start of a frame."""
    if len(prefix) != PREFIX_SIZE:
        raise WireError("truncated frame")
    nhead, nblob = _LENGTHS.unpack(prefix)
    if nhead > MAX_HEADER:
        raise WireError(f"header of {nhead} bytes exceeds {MAX_HEADER}")
    if nblob > MAX_BLOB:
        raise WireError(f"{nblob / 2**20:.0f} MiB of tensors, more than the {MAX_BLOB >> 20} MiB allowed")
    return nhead, nblob


def decode_header(head: bytes) -> dict:
    """Parse a frame's JSON header; any failure, deep nesting included, is a WireError."""
    try:
        header = json.loads(head)
    except (ValueError, RecursionError, MemoryError, UnicodeDecodeError) as exc:
        raise WireError(f"malformed header ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise WireError("header is not an object")
    return header


# ---------------------------------------------------------------------------------------------------------------
# strict shapes of headers


class Map:
    """A schema: an object whose keys are free strings and whose values all follow one schema."""

    def __init__(self, of):
        self.of = of


class Opt:
    """A schema: null, or the inner schema."""

    def __init__(self, of):
        self.of = of


VALUE = object()  # a schema: a value description (checked further by Decoder)


def check(obj, schema, where: str = "reply"):
    """Raise WireError unless obj follows schema exactly; an object's keys are all optional, none unknown."""
    if isinstance(schema, Opt):
        if obj is not None:
            check(obj, schema.of, where)
        return
    if schema is VALUE:
        if not isinstance(obj, dict):
            raise WireError(f"{where}: a value description must be an object")
        return
    if schema is bool:
        ok = isinstance(obj, bool)
    elif schema is int:
        ok = isinstance(obj, int) and not isinstance(obj, bool) and abs(obj) < 2**53
    elif schema is float:
        ok = isinstance(obj, (int, float)) and not isinstance(obj, bool)
    elif schema is str:
        ok = isinstance(obj, str) and len(obj) <= MAX_STR
    elif isinstance(schema, list):
        if not isinstance(obj, list) or len(obj) > MAX_ITEMS:
            raise WireError(f"{where}: expected a list of at most {MAX_ITEMS} entries")
        for k, x in enumerate(obj):
            check(x, schema[0], f"{where}[{k}]")
        return
    elif isinstance(schema, Map):
        if not isinstance(obj, dict) or len(obj) > MAX_ITEMS:
            raise WireError(f"{where}: expected an object of at most {MAX_ITEMS} entries")
        for k, x in obj.items():
            check(k, str, where)
            check(x, schema.of, f"{where}.{k[:40]}")
        return
    elif isinstance(schema, dict):
        if not isinstance(obj, dict):
            raise WireError(f"{where}: expected an object")
        for k, x in obj.items():
            if k not in schema:
                raise WireError(f"{where}: unexpected field {str(k)[:40]!r}")
            check(x, schema[k], f"{where}.{k}")
        return
    else:  # pragma: no cover - a bug in a schema, not in a reply
        raise TypeError(f"unknown schema {schema!r}")
    if not ok:
        raise WireError(f"{where}: expected {schema.__name__}, got {type(obj).__name__}")


ERROR = {
    "type": str,
    "message": str,
    "line": Opt(int),
    "code": Opt(str),
    "function": Opt(str),
    "memory": bool,
}


# ---------------------------------------------------------------------------------------------------------------
# values


class Opaque:
    """A returned value that is not a tensor; only its type name crosses the wire."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"Opaque({self.type_name})"


class Returned:
    """A tensor a child returned, with the autograd flags it carried."""

    def __init__(self, tensor: torch.Tensor, requires_grad: bool, grad_fn: bool):
        self.tensor = tensor
        self.requires_grad = requires_grad
        self.grad_fn = grad_fn


class Decoder:
    """Rebuild values from one frame's blob; each byte may back at most one tensor, and values are counted."""

    def __init__(self, blob: bytes):
        self.blob = blob
        self.used: list[tuple[int, int]] = []
        self.values = 0

    def value(self, desc, depth: int = 0):
        """Rebuild a described value: a Returned tensor, an int, a dict of them, or an Opaque type name."""
        self.values += 1
        if self.values > MAX_VALUES:
            raise WireError(f"more than {MAX_VALUES} values in one reply")
        if not isinstance(desc, dict):
            raise WireError("value description is not an object")
        kind = desc.get("kind")
        if kind == "tensor":
            return self._tensor(desc)
        if kind == "dict" and depth == 0:
            items = desc.get("items")
            check(items, Map(VALUE), "dict value")
            return {k: self.value(v, depth + 1) for k, v in items.items()}
        if kind == "int":
            value = desc.get("value")
            check(value, int, "int value")
            return value
        if kind == "other":
            name = desc.get("type", "?")
            check(name, str, "type name")
            return Opaque(name[:200])
        raise WireError(f"unknown value kind {str(kind)[:40]!r}")

    def _tensor(self, desc: dict):
        check(
            desc,
            {
                "kind": str,
                "dtype": str,
                "shape": [int],
                "offset": int,
                "nbytes": int,
                "requires_grad": bool,
                "grad_fn": bool,
            },
            "tensor",
        )
        shape, offset, nbytes = desc.get("shape"), desc.get("offset"), desc.get("nbytes")
        if not isinstance(shape, list) or len(shape) > MAX_DIMS or any(s < 0 for s in shape):
            raise WireError(f"bad tensor shape {str(shape)[:80]}")
        if not (isinstance(offset, int) and isinstance(nbytes, int)):
            raise WireError("tensor without its byte range")
        numel = 1
        for s in shape:
            numel *= s
        if desc.get("dtype") not in DTYPES:
            if offset < 0 or nbytes < 0 or offset + nbytes > len(self.blob):
                raise WireError("tensor bytes out of range")
            return Opaque(f"torch.Tensor of dtype {str(desc.get('dtype'))[:40]}")
        dtype_name = desc["dtype"]
        if nbytes != numel * _ITEMSIZE[dtype_name]:
            raise WireError("tensor byte count does not match its shape")
        if offset < 0 or offset + nbytes > len(self.blob):
            raise WireError("tensor bytes out of range")
        if nbytes:
            if any(offset < end and start < offset + nbytes for start, end in self.used):
                raise WireError("two tensors share the same bytes")
            self.used.append((offset, offset + nbytes))
            flat = torch.frombuffer(bytearray(self.blob[offset : offset + nbytes]), dtype=DTYPES[dtype_name])
        else:
            flat = torch.empty(0, dtype=DTYPES[dtype_name])
        return Returned(flat.reshape(shape), bool(desc.get("requires_grad")), bool(desc.get("grad_fn")))


def decode_value(desc, blob: bytes):
    """Rebuild one described value on its own (see Decoder)."""
    return Decoder(blob).value(desc)
