"""How the site rebuilds the prompt each test question saw: the run's template (its `prompt` config),
split by Python's own format parser into literal text and field names, so the page joins the parts
with the retrieved memories' texts exactly as `PromptTemplate.render` formats them, and each agent's
instruction, sent as the system message unless `prompt.system` is false."""

from string import Formatter
from typing import Optional, Union

from ms.common.errors import UserError
from ms.config.schema import PromptConfig
from ms.report.common.saved_config import SavedConfig

Part = Union[str, dict]  # literal text, or {"field": name}
FIELDS = {"example": {"question", "answer"}, "with_examples": {"examples", "query"}, "zero_shot": {"query"}}


def template_parts(text: str, allowed: set[str]) -> list[Part]:
    """The template as literal text and fields; a field with a conversion or format spec, or not among
    `allowed`, is a ValueError (the page would not render it as Python does)."""
    parts: list[Part] = []
    for literal, name, spec, conversion in Formatter().parse(text):
        if literal:
            parts.append(literal)
        if name is None:
            continue
        if spec or conversion or name not in allowed:
            raise ValueError(
                f"the prompt template field {{{name}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}} is not one the site renders"
            )
        parts.append({"field": name})
    return parts


def prompt_spec(saved: SavedConfig) -> tuple[Optional[dict], Optional[str]]:
    """What the page needs to rebuild a run's prompts, and None; or None and why it cannot."""
    template = {**PromptConfig().__dict__, **saved.prompt}
    try:
        parts = {key: template_parts(str(template[key]), allowed) for key, allowed in FIELDS.items()}
    except ValueError as error:
        return None, str(error)
    try:
        agents = saved.run_agents()
    except UserError as error:
        return None, f"the run's agents cannot be read: {error}"
    return {
        **parts,
        "separator": str(template["separator"]),
        "system": bool(template["system"]),
        "instructions": {name: a.instruction for name, a in agents.items()},
    }, None
