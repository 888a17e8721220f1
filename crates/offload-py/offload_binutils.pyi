"""Type stubs for offload_binutils (the compiled module of offload-binutils).

Functions taking ``input`` accept a path (``str`` or ``os.PathLike``) or the
contents (``bytes``, ``bytearray``). Work runs without the GIL.
"""

import os
from typing import Any, Literal, Sequence, TypedDict, Union

__version__: str

Input = Union[str, "os.PathLike[str]", bytes, bytearray]

class Error(Exception):
    """Every offload_binutils error; messages are the CLI's."""

class FileError(Error):
    """A file could not be opened or read."""

class FormatError(Error):
    """Damaged input (decompression, hash, OffloadBinary structure)."""

class SelectError(Error):
    """A fat binary holds code for the runtime but nothing loads on the GPU,
    or there is no code for the runtime; ``candidates`` holds the verdicts."""

    candidates: list[CodeObject]

class BundlerError(Error):
    """clang-offload-bundler's errors, in its words."""

class InvalidArgumentError(Error):
    """A bad GPU name, runtime, image description or code object."""

class CodeObject:
    """One code object: the fields of ``offload list --json``."""

    file: str | None
    location: str
    format: Literal["bundle", "compressed-bundle", "text-bundle", "offload-binary", "cuda-fatbin", "cubin"]
    id: str
    offload_kind: str
    triple: str
    target_id: str
    stored_target: str
    size: int
    offset: int | None
    compressed: bool
    unit: int
    image_kind: str | None
    index: int
    container: bool
    selected: bool | None
    reason_code: str | None
    reason: str | None
    uri: str | None
    def to_dict(self) -> dict[str, object]: ...

class Diagnostic:
    """One finding of verify(): the fields of ``offload verify --json``."""

    file: str | None
    severity: Literal["error", "warning"]
    offset: int | None
    location: str
    message: str
    def to_dict(self) -> dict[str, object]: ...

class UnpackedImage(TypedDict):
    image: bytes
    image_kind: str
    offload_kind: str
    flags: int
    version: int
    offset: int
    strings: dict[str, str]

def scan(input: Input) -> list[CodeObject]: ...
def select(input: Input, gpu: str, runtime: Literal["hip", "openmp", "cuda"] = "hip") -> list[CodeObject]: ...
def extract(input: Input, code_object: CodeObject | int) -> bytes: ...
def verify(input: Input) -> list[Diagnostic]: ...
def kernels(input: Input) -> list[dict[str, Any]]: ...
def bundle(
    targets: Sequence[str],
    inputs: Sequence[bytes],
    *,
    compress: bool = False,
    align: int = 1,
    llvm_version: Literal[19, 22] = 19,
) -> bytes: ...
def unbundle(
    input: Input, targets: Sequence[str], *, allow_missing: bool = False, llvm_version: Literal[19, 22] = 19
) -> list[bytes]: ...
def decompress(input: Input) -> bytes: ...
def pack(images: Sequence[dict[str, str | bytes]], *, llvm_version: Literal[19, 22] = 19) -> bytes: ...
def unpack(input: Input) -> list[UnpackedImage]: ...
