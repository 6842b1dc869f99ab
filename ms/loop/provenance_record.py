"""What metrics.json says a run's numbers depend on beyond its config (`provenance`, made by
ms.loop.provenance), typed, and what the run's cell was (`cell`, made by ms.loop.cell.record).

Vintages: runs from before the changed paths were recorded lack `changed`; runs from before the cell
recorded its inputs lack `dtypes`, `inputs` and `code_sha256`; each is named in `absent` and stays out when
written back. So is a backbone's `dtype` where not written (it is, where the model ran in the run's
process), and a cell's `accepted_code` (written where a later request accepted the run for other code).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional

from ms.common.sections import absent_from, written

PROVENANCE = ("commit", "dirty", "changed", "versions", "backbones", "encoders", "micro_batch")
BACKBONE = ("provider", "engine", "batch_size", "model", "sha256", "dtype")
CELL = ("data_sha256", "config", "dtypes", "inputs", "code_sha256", "accepted_code")


@dataclass(frozen=True)
class BackboneProvenance:
    provider: Optional[str] = None
    engine: Optional[str] = None
    batch_size: Optional[int] = None  # None: an API backbone
    model: Optional[str] = None
    sha256: Optional[Mapping[str, str]] = None  # weight file -> its hash; None where not hashed
    dtype: Optional[str] = None  # the float type its model ran in, where it ran in the run's process
    absent: frozenset[str] = frozenset()

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]) -> "BackboneProvenance":
        return cls(**{name: fields.get(name) for name in BACKBONE}, absent=absent_from(fields, BACKBONE))

    def to_json(self) -> dict[str, Any]:
        return written(self, BACKBONE)


@dataclass(frozen=True)
class EncoderProvenance:
    model: Optional[str]
    sha256: Optional[Mapping[str, str]]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "sha256": self.sha256}


@dataclass(frozen=True)
class Provenance:
    commit: Optional[str] = None  # None outside a git checkout
    dirty: Optional[bool] = None
    changed: Optional[tuple[str, ...]] = None  # `git status --porcelain` lines of a dirty tree
    versions: Optional[Mapping[str, Optional[str]]] = None  # package -> its version
    backbones: Optional[Mapping[str, BackboneProvenance]] = None
    encoders: Optional[Mapping[str, EncoderProvenance]] = None  # role -> its encoder
    micro_batch: Optional[int] = None
    absent: frozenset[str] = frozenset()

    @classmethod
    def from_json(cls, fields: Optional[Mapping[str, Any]]) -> Optional["Provenance"]:
        """The record; None for a run written before metrics.json had one."""
        if not isinstance(fields, Mapping):
            return None
        changed, backbones, encoders = fields.get("changed"), fields.get("backbones"), fields.get("encoders")
        if encoders is not None:
            encoders = {role: EncoderProvenance(e.get("model"), e.get("sha256")) for role, e in encoders.items()}
        return cls(
            commit=fields.get("commit"),
            dirty=fields.get("dirty"),
            changed=None if changed is None else tuple(changed),
            versions=fields.get("versions"),
            backbones=None if backbones is None else {n: BackboneProvenance.from_json(b) for n, b in backbones.items()},
            encoders=encoders,
            micro_batch=fields.get("micro_batch"),
            absent=absent_from(fields, PROVENANCE),
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        def as_json(name: str, value: Any) -> Any:
            if value is None or name not in ("changed", "backbones", "encoders"):
                return value
            return list(value) if name == "changed" else {key: v.to_json() for key, v in value.items()}

        return written(self, PROVENANCE, as_json)


@dataclass(frozen=True)
class CellRecord:
    """What a later request must match for the run to answer it (ms.loop.cell)."""

    data_sha256: Optional[str] = None  # the fingerprint of the examples the run read
    config: Optional[Mapping[str, Any]] = None  # every setting that can change its numbers, by dotted key
    dtypes: Optional[Mapping[str, Any]] = None  # backbone -> the float type it resolved to
    inputs: Optional[Mapping[str, Any]] = None  # the files it read, by hash
    code_sha256: Optional[str] = None  # the code it ran
    accepted_code: tuple[str, ...] = ()  # the code since accepted to stand for it (accept_code_change=true)
    absent: frozenset[str] = frozenset()

    @classmethod
    def from_json(cls, fields: Optional[Mapping[str, Any]]) -> Optional["CellRecord"]:
        """The record; None for a run written before metrics.json had one."""
        if not isinstance(fields, Mapping):
            return None
        read = {name: fields.get(name) for name in CELL}
        read["accepted_code"] = tuple(fields.get("accepted_code") or ())
        return cls(**read, absent=absent_from(fields, CELL))

    def to_json(self) -> dict[str, Any]:
        return written(self, CELL, lambda name, value: list(value) if name == "accepted_code" else value)

    def accepting(self, code: str) -> "CellRecord":
        """The record once a request has accepted the run for the code hashed `code`."""
        return replace(self, accepted_code=(*self.accepted_code, code), absent=self.absent - {"accepted_code"})
