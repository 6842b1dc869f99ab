"""The access rule a run retrieved under, as its metrics.json records it (`run.access`: the grant table,
ms.pool.access), read for the sharing matrix, which shows each reader's grants beside its retrievals."""

from typing import Optional

from ms.pool.access import SEED
from ms.pool.access.record import AccessRecord


class Grants:
    """reader -> the writers it was granted; a run without an `access` record ran under access=open."""

    def __init__(self, record: Optional[AccessRecord]):
        self.record = record
        self.table: dict[str, Optional[list[str]]] = dict(record.grants) if record is not None else {}

    @property
    def open(self) -> bool:
        return self.record is None

    def writers(self, reader: str) -> Optional[list[str]]:
        """The writers `reader` was granted; None: every writer."""
        if self.open:
            return None
        if reader in self.table:
            return self.table[reader]
        return self.record.default if self.record.has_default else None

    def granted(self, reader: str, writer: str) -> bool:
        """Whether `reader` was granted the memories `writer`'s stream wrote (its seeds: where it was
        granted `writer` or `seed`)."""
        writers = self.writers(reader)
        return writers is None or writer in writers

    def text(self, reader: str) -> str:
        writers = self.writers(reader)
        if writers is None:
            return "all"
        return ", ".join(sorted(writers, key=lambda w: (w != SEED, w))) or "none"

    def describe(self) -> str:
        """One line: which rule, from which file, learned how."""
        if self.open:
            return "access=open: every agent read every memory of its scope"
        learned = self.record.learned or {}
        how = (
            f", learned on half {learned['half']} of the test questions of `{learned.get('run')}` "
            f"({learned.get('metric')}); score it on half {learned.get('scored_on')} only"
            if "half" in learned
            else ""
        )
        return f"access=rule from `{self.record.file}`{how}"
