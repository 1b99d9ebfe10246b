"""C element types of kernel parameters and the numpy dtypes that hold them.

bfloat16 has no numpy dtype: it travels as uint16 bit patterns and is widened to float32 on
the host for comparison (the name "bfloat16" keeps its tolerance).
"""

from __future__ import annotations

FLOAT_TYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "__half": "float16",
    "half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
}

INT_TYPES: dict[str, str] = {
    "bool": "bool",
    "char": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "short": "int16",
    "short int": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "uint16_t": "uint16",
    "int": "int32",
    "signed": "int32",
    "signed int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long": "int64",  # LP64: CUDA on Linux
    "long int": "int64",
    "long long": "int64",
    "long long int": "int64",
    "int64_t": "int64",
    "unsigned long": "uint64",
    "unsigned long int": "uint64",
    "unsigned long long": "uint64",
    "unsigned long long int": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
}


def dtype_name(c_type: str) -> str | None:
    """The dtype name of a C element type, or None for one the profiler cannot fill."""
    return FLOAT_TYPES.get(c_type) or INT_TYPES.get(c_type)


def storage_dtype(name: str) -> str:
    """The numpy dtype that stores values of dtype `name` on the device."""
    return "uint16" if name == "bfloat16" else name


def itemsize(name: str) -> int:
    return {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
            "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8}[name]
