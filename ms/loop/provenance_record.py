"""What metrics.json says a run's numbers depend on beyond its config (`provenance`, made by
ms.loop.provenance), typed, and what the run's cell was (`cell`, made by ms.loop.cell.record).

Vintages: runs from before the changed paths were recorded lack `changed`; runs from before the cell
recorded its inputs lack `dtypes`, `inputs` and `code_sha256`; each is named in `absent` and stays out when
written back. So is a backbone's `dtype` where not written (it is, where the model ran in the run's
process), and a cell's `accepted_code` (written where a later request accepted the run for other code).
"""

from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Mapping, Optional

from ms.common.sections import Section, read


def _each(section: Callable[[Mapping[str, Any]], Any]) -> Callable[[Optional[Mapping[str, Any]]], Any]:
    """Reads a mapping of sections (name -> its fields) through `section`; None where not written."""
    return lambda found: None if found is None else {name: section(fields) for name, fields in found.items()}


@dataclass(frozen=True)
class BackboneProvenance(Section):
    provider: Optional[str] = None
    engine: Optional[str] = None
    batch_size: Optional[int] = None  # None: an API backbone
    model: Optional[str] = None
    sha256: Optional[Mapping[str, str]] = None  # weight file -> its hash; None where not hashed
    dtype: Optional[str] = None  # the float type its model ran in, where it ran in the run's process
    absent: frozenset[str] = frozenset()


@dataclass(frozen=True)
class EncoderProvenance:
    model: Optional[str]
    sha256: Optional[Mapping[str, str]]

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]) -> "EncoderProvenance":
        return cls(fields.get("model"), fields.get("sha256"))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Provenance(Section):
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
        return read(
            cls,
            fields,
            changed=lambda changed: None if changed is None else tuple(changed),
            backbones=_each(BackboneProvenance.from_json),
            encoders=_each(EncoderProvenance.from_json),
        )


@dataclass(frozen=True)
class CellRecord(Section):
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
        return read(cls, fields, accepted_code=lambda codes: tuple(codes or ()))

    def accepting(self, code: str) -> "CellRecord":
        """The record once a request has accepted the run for the code hashed `code`."""
        return replace(self, accepted_code=(*self.accepted_code, code), absent=self.absent - {"accepted_code"})
