"""How a backend fails for good: the errors every provider and engine raises, which the CLIs report as
user errors (a message that names the endpoint or setting, no traceback)."""

from ms.common.errors import UserError


class BackendError(UserError, RuntimeError):
    """A backend failed for good (after retries) or is misconfigured: the message names the endpoint
    or setting, so the CLIs report it as a user error."""


class LoglikelihoodUnsupported(BackendError):
    """The backend cannot score a given continuation; callers fall back to verbalized scoring."""
