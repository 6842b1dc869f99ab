"""The gates in front of the shared pool: what decides which new pairs become memories. One module
per gate, each a `Gate` (ms.gates.base) registered by name in ms.config.parts.GATES, so the loop, the
validation, plan mode, the run record and the gate check ask the gate itself, never its name:

- rubric: an LLM grades the pair against its rubric (ms.gates.scorer);
- utility: the pair is admitted when it helps its nearest memories' answers as an example (ms.gates.replay);
- both: the rubric first, then utility on what the rubric admits (utility alone cannot tell an
  on-style answer to the wrong question from a right one; ARCHITECTURE.md, "Utility");
- rubric_qdep: the rubric first, then the question-dependence test on what it admits: the answer must be
  likelier after its own question than after other questions of its agent (ms.gates.question_dependence);
- all, random: admission controls that judge nothing, so that a gate's effect can be told from the
  effect of admitting more or less.

A new gate is one module here (or in any package), its settings (a dataclass extending
ms.config.GateConfig in a light module: ms.gates.settings holds the built-in gates') and one
conf/gate/<name>.yaml typed by them; its name joins GATES by a table entry, an entry point, or
`GATES.register` (ms.config.registry says which when).
"""
