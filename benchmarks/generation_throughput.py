"""Generation and scoring speed of each engine on a backbone (SmolLM2-135M unless told), and its greedy agreement with hf, in one run.

    make bench     # or: python benchmarks/generation_throughput.py [--json FILE] [--agreement-json FILE]
    python benchmarks/generation_throughput.py --backbone qwen2.5-0.5b --engines hf,llamacpp

`--backbone`: a conf/backbone name of the hf provider; `--engines`: which of the engines below to
measure (all by default; hf always, since agreement and the other engines' scoring are hf's).

Engines, each loaded once: hf (transformers fp32, `backbone.engine=hf`); hf-int8 (transformers
with torch's dynamic int8 quantization of every Linear layer: a candidate, not an engine choice);
hf-bf16 (transformers in bfloat16, `backbone.dtype=bfloat16`);
llamacpp (the same GGUF in-process through llama-cpp-python, several sequences per llama_batch),
also with its weights re-written in f16 and q4_0 (llamacpp-f16, llamacpp-q4_0); ct2 (CTranslate2,
int8 weights). Engines whose package is missing are skipped with a note.

Prompts are the agents' own: the first questions of data/, round-robin over the nine agents,
chat-formatted as they send them (system instruction, paper's zero-shot template). Greedy
decoding, the response cache off. `decode_tok_s`: new tokens per second of generate's wall time
(prefill included), at 1 sequence per call and at 16. `score_tok_s`: teacher-forced
loglikelihood of the reference answers given the same prompts, tokens (context + answer) per
second. Each also per CPU second of this process, all its threads (`decode_tok_per_cpu_s`,
`score_tok_per_cpu_s`): on cores that other jobs share, wall time measures the share of the cores
the process got as much as the engine. The llama.cpp engines and ct2 leave scoring on transformers
(exact), so their scoring row is hf's. Agreement: greedy text of each engine against hf's on
`--prompts` prompts (50) at 16 sequences per call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from conftest import compose_config  # noqa: E402

from ms.agents import PromptTemplate, agents_from, chat  # noqa: E402
from ms.common.errors import UserError  # noqa: E402
from ms.llm import build_lm  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "data"


def agent_prompts(cfg, n: int) -> tuple[list, list[str]]:
    """n (chat, reference answer) pairs: question i of every agent before question i + 1 of any."""
    template = PromptTemplate(**cfg.prompt)
    agents = agents_from(cfg.agents)
    rows = {name: [json.loads(line) for line in (DATA / f"{name}.jsonl").open()] for name in agents}
    chats, answers = [], []
    for i in range(n):
        name = list(rows)[i % len(rows)]
        item = rows[name][i // len(rows)]
        chats.append(chat(agents[name], template.render(item["question"]), template.system))
        answers.append(item["answer"])
    return chats, answers


def timed(run) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds (all its threads, llama.cpp's included) of `run()`."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def decode(lm, chats, per_call: int, max_new_tokens: int) -> tuple[float, float, list[str]]:
    """Tokens per wall second and per CPU second of greedy generation, `per_call` prompts per
    generate call, and the texts."""
    before, texts = lm.usage.completion_tokens, []

    def run():
        for i in range(0, len(chats), per_call):
            texts.extend(lm.generate(chats[i : i + per_call], max_new_tokens=max_new_tokens, temperature=0.0))

    wall, cpu = timed(run)
    made = lm.usage.completion_tokens - before
    return made / wall, made / cpu, texts


def score(lm, chats, answers, per_call: int) -> tuple[float, float]:
    """Tokens per wall second and per CPU second (context + continuation) of teacher-forced scoring."""
    lm.batch_size = per_call
    contexts = [lm.chat_context(c) for c in chats]
    before = lm.usage.prompt_tokens

    def run():
        for i in range(0, len(chats), per_call):
            lm.loglikelihood(contexts[i : i + per_call], answers[i : i + per_call])

    wall, cpu = timed(run)
    scored = lm.usage.prompt_tokens - before
    return scored / wall, scored / cpu


def first_difference(a: str, b: str) -> int | None:
    """Character offset where two texts first differ; None if equal."""
    if a == b:
        return None
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


ENGINES = ("hf", "hf-int8", "hf-bf16", "llamacpp", "llamacpp-f16", "llamacpp-q4_0", "ct2")


def build_engines(cfg, cache: str, wanted: tuple[str, ...] = ENGINES) -> dict:
    cfg.backbone.engine = "hf"  # the backbone's own default may be another engine
    engines = {"hf": build_lm(cfg.backbone, cache, use_response_cache=False)}
    if "hf-int8" in wanted:
        int8 = build_lm(cfg.backbone, cache, use_response_cache=False)
        # Per-channel scales: per-tensor int8 turns SmolLM2 into noise (measured: garbage text).
        int8.net = quantize_dynamic(int8.net, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)
        engines["hf-int8"] = int8
    if "hf-bf16" in wanted:  # backbone.dtype=bfloat16: transformers on the CPU's bfloat16 units
        cfg.backbone.dtype = "bfloat16"
        engines["hf-bf16"] = build_lm(cfg.backbone, cache, use_response_cache=False)
        cfg.backbone.dtype = "auto"
    for engine in (e for e in ENGINES[3:] if e in wanted):
        cfg.backbone.engine = engine
        try:
            engines[engine] = build_lm(cfg.backbone, cache, use_response_cache=False)
        except UserError as error:
            print(f"{engine}: skipped ({error})")
    cfg.backbone.engine = "hf"
    return engines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--single", type=int, default=4, help="prompts decoded one per call")
    parser.add_argument("--prompts", type=int, default=50, help="prompts decoded 16 per call (agreement set)")
    parser.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/ms"), help="holds converted models")
    parser.add_argument("--json", help="write one row per (engine, sequences) here")
    parser.add_argument("--agreement-json", help="write greedy agreement with hf here")
    parser.add_argument("--backbone", default="smollm2", help="a conf/backbone name (provider hf)")
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated, of {', '.join(ENGINES)}")
    args = parser.parse_args()
    wanted = tuple(e for e in args.engines.split(",") if e)
    if unknown := [e for e in wanted if e not in ENGINES]:
        parser.error(f"--engines: unknown {', '.join(unknown)}; choose from {', '.join(ENGINES)}")
    load_before = os.getloadavg()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores, "
        f"backbone {args.backbone}, max_new_tokens={args.max_new_tokens}, load average {load_before[0]:.1f}"
    )
    cfg = compose_config([f"backbone={args.backbone}"])
    chats, answers = agent_prompts(cfg, args.prompts)
    engines = build_engines(cfg, args.cache_dir, wanted)
    for lm in engines.values():
        lm.generate([chats[0]], max_new_tokens=4)  # warm up
    rows, texts = [], {}
    for per_call, n in ((1, args.single), (16, args.prompts)):
        full = (n // per_call) * per_call  # timed: whole calls only; the rest is decoded for agreement
        for name, lm in engines.items():
            lm.batch_size = per_call
            tok_s, tok_cpu_s, got = decode(lm, chats[:full], per_call, args.max_new_tokens)
            if full < n:
                got += lm.generate(chats[full:n], max_new_tokens=args.max_new_tokens, temperature=0.0)
            texts[name, per_call] = got
            scored_by = name if name in ("hf", "hf-int8", "hf-bf16") else "hf"
            if scored_by == name:
                score_tok_s, score_tok_cpu_s = score(lm, chats[:16], answers[:16], per_call)
            else:
                hf_row = next(r for r in rows if r["engine"] == "hf" and r["sequences"] == per_call)
                score_tok_s, score_tok_cpu_s = hf_row["score_tok_s"], hf_row["score_tok_per_cpu_s"]
            rows.append(
                {
                    "backbone": args.backbone,
                    "engine": name,
                    "sequences": per_call,
                    "decode_tok_s": round(tok_s, 1),
                    "score_tok_s": round(score_tok_s, 1),
                    "decode_tok_per_cpu_s": round(tok_cpu_s, 1),
                    "score_tok_per_cpu_s": round(score_tok_cpu_s, 1),
                    "scoring_on": scored_by,
                    "timed_prompts": full,
                    "max_new_tokens": args.max_new_tokens,
                    "threads": torch.get_num_threads(),
                }
            )
            print(
                f"{name:9s} {per_call:2d} sequences: decode {tok_s:7.1f} tok/s ({tok_cpu_s:7.1f} per CPU s), "
                f"score {score_tok_s:7.1f} tok/s ({score_tok_cpu_s:7.1f} per CPU s, on {scored_by})",
                flush=True,
            )
    agreement = {}
    for name in engines:
        if name == "hf":
            continue
        offsets = [first_difference(a, b) for a, b in zip(texts["hf", 16], texts[name, 16])]
        differ = [o for o in offsets if o is not None]
        agreement[name] = {
            "prompts": len(offsets),
            "identical": len(offsets) - len(differ),
            "identical_share": round(1 - len(differ) / len(offsets), 3),
            "median_first_difference_char": statistics.median(differ) if differ else None,
            "first_difference_chars": offsets,
        }
        print(
            f"{name:9s} vs hf: {agreement[name]['identical']}/{len(offsets)} identical greedy texts, "
            f"median first difference at char {agreement[name]['median_first_difference_char']}"
        )
    load_after = os.getloadavg()
    print(f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    for rows_of, path in ((rows, args.json), (None, args.agreement_json)):
        if path:
            value = (
                rows_of
                if rows_of is not None
                else {
                    "conditions": {
                        "backbone": args.backbone,
                        "max_new_tokens": args.max_new_tokens,
                        "sequences_per_call": 16,
                        "load_average_before": load_before[0],
                        "load_average_after": load_after[0],
                    },
                    "engines": agreement,
                    "texts": {f"{k[0]}": v for k, v in texts.items() if k[1] == 16},
                }
            )
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
