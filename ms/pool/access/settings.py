"""Each access rule's own settings: one dataclass per registered rule that has any, extending the section
every rule shares (ms.config.AccessConfig: its name), registered as the schema of its option in the `access`
group (ms.config.options; conf/access/<name>.yaml names it in its defaults list). A key a rule does not
declare is refused at composition under that rule, in one line (ms.cli.compose): access.file under
access=open, which grants every writer and reads no file. access=open declares nothing of its own.

Light on purpose: it imports the config layer only, no torch, since composing a config loads it.
"""

from dataclasses import dataclass
from typing import Optional

from ms.config.schema import AccessConfig


@dataclass
class RuleSettings(AccessConfig):
    """access=rule: the grant table of a rule file (docs/concepts/access.md; ms.pool.access.table)."""

    file: Optional[str] = None  # the rule file (ms-data learn-access writes one); required: validation says so
