"""Plan mode's count of what a stream of best-of-n answers (stream.best_of > 1; ms.loop.best_of) asks
for beyond one answer a question: n sampled answers, then the selector's call on each candidate; and
what a stream-only run (eval.enabled=false) leaves out."""

from ms.llm import provider_class
from ms.llm.base import cache_key, generate_params
from ms.llm.sampling import sample_params


def planned_best_of(plan, agent: str, text: str, k: float, prompt: float, question: float, reply: float) -> None:
    """The n samples of `agent`'s answer to the stream question `text` (`prompt` tokens, k shots; looked up
    in the response cache where the prompt is zero-shot), and the selector's n calls: a grading each
    (stream.select=grader, under score, as the scorer counts them), or a scored pass each (likelihood,
    under answer; an empty sample is not scored, so that count is an upper bound)."""
    settings, name = plan.settings, plan.agents[agent].backbone  # ms.plan.calls.PlanSettings
    stream = settings.stream
    n, row = stream.best_of, plan.row("answer", name)
    if k <= 0 and settings.use_cache:
        bc = plan.backbone(name)
        params = generate_params(bc.generation.max_new_tokens, stream.temperature, bc.generation.stop)
        provider = provider_class(bc)
        model, asked = provider.cache_model_of(bc, "generate"), plan.zero_shot_chat(agent, text)
        for i in range(n):
            key = cache_key("generate", provider.provider, model, sample_params(params, settings.seed, i), asked)
            row.add(1, prompt, reply, cached=float(plan.probe.held(key)))
    else:
        row.add(n, prompt, reply, cached_exact=not settings.use_cache)
    if stream.select == "grader":
        for _ in range(n):
            plan.grade(agent, question, reply)
    else:
        row.add(n, prompt + reply, 0.0, exact=False, cached_exact=not settings.use_cache)


def best_of_note(stream, evaluation) -> list[str]:
    """The plan's lines on best-of-n writing and on a stream-only run, where they apply (`stream`, `evaluation`:
    the run's stream and eval sections)."""
    notes = []
    if stream.best_of > 1 and stream.answers == "model":
        grader = stream.select == "grader"
        notes.append(
            f"stream.best_of={stream.best_of}: {stream.best_of} sampled answers a stream question "
            f"(temperature {stream.temperature}), each "
            + ("graded by the rubric scorer (counted under score)" if grader else "scored by its writer (under answer)")
            + "; only the kept one goes to the gate"
        )
    if not evaluation.enabled:
        notes.append("eval.enabled=false: a stream-only run; no test question is answered or scored")
    return notes
