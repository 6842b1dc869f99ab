"""Where one research cell's time goes: a run from an empty response cache, then, per role, its calls,
tokens, backend seconds and tokens per second, beside the engine benchmark's rates for its backbone.

    python benchmarks/cell_profile.py --out /tmp/profile --json results/benchmarks/cell_profile.json \
        -- experiment=figure4_offline 'fills=[27,100]'

Everything after `--` is ms-run's overrides. The run goes to OUT/run with its own empty cache
(OUT/cache), so every call reaches the backend. The rates compared against are
results/benchmarks/generation_smollm2_quiet.json's (transformers, 16 sequences per call): decoding
tokens/s for the answer role, scoring tokens/s for the roles that score text. A cell's answer rate
counts completion tokens only (prefill included in its seconds), as the benchmark's decode rate does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENGINE_RATES = REPO / "results" / "benchmarks" / "generation_smollm2_quiet.json"
GENERATING = {"answer", "summarize", "invert"}  # roles whose tokens are mostly decoded, not scored


def engine_rates(backbone: str, engine: str, sequences: int = 16) -> dict:
    try:
        rows = json.loads(ENGINE_RATES.read_text())
    except OSError:
        return {}
    return next(
        (r for r in rows if r["backbone"] == backbone and r["engine"] == engine and r["sequences"] == sequences), {}
    )


def profile(metrics: dict) -> list[dict]:
    """One row per backbone and role that made calls."""
    rows = []
    for name, backbone in metrics["usage"]["backbones"].items():
        engine = metrics.get("provenance", {}).get("backbones", {}).get(name, {}).get("engine", "hf")
        rates = engine_rates(name, engine)
        for role, u in backbone["roles"].items():
            if not u["calls"]:
                continue
            seconds = u["backend_seconds"]
            generating = role in GENERATING
            tokens = u["completion_tokens"] if generating else u["prompt_tokens"] + u["completion_tokens"]
            rows.append(
                {
                    "backbone": name,
                    "engine": engine,
                    "role": role,
                    "calls": u["calls"],
                    "prompt_tokens": u["prompt_tokens"],
                    "completion_tokens": u["completion_tokens"],
                    "backend_seconds": round(seconds, 1),
                    "tok_s": round(tokens / seconds, 1) if seconds else None,
                    "rate_of": "completion" if generating else "prompt+completion",
                    "engine_benchmark_tok_s": rates.get("decode_tok_s" if generating else "score_tok_s"),
                }
            )
    return rows


def format_rows(rows: list[dict], wall: float) -> str:
    lines = [
        f"{'role':<10} {'calls':>6} {'prompt tok':>11} {'compl. tok':>10} {'backend s':>10} {'tok/s':>8}"
        f" {'bench tok/s':>11}"
    ]
    for r in rows:
        lines.append(
            f"{r['role']:<10} {r['calls']:>6} {r['prompt_tokens']:>11,} {r['completion_tokens']:>10,}"
            f" {r['backend_seconds']:>10.1f} {r['tok_s'] or 0:>8.1f} {r['engine_benchmark_tok_s'] or '-':>11}"
        )
    total = sum(r["backend_seconds"] for r in rows)
    lines.append(f"backend seconds in all {total:,.1f}; wall {wall:,.1f} s")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="a new folder: OUT/run and OUT/cache")
    parser.add_argument("--json", type=Path, help="write the profile here")
    parser.add_argument("overrides", nargs="*", help="ms-run's overrides (after --)")
    args = parser.parse_args()
    if (args.out / "cache").exists():
        sys.exit(f"{args.out / 'cache'} exists: a profile starts from an empty cache; name a new --out")
    run = args.out / "run"
    command = [
        str(Path(sys.executable).parent / "ms-run"),
        *args.overrides,
        f"hydra.run.dir={run}",
        f"cache_dir={args.out / 'cache'}",
    ]
    started = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    wall = time.perf_counter() - started
    metrics = json.loads((run / "metrics.json").read_text())
    rows = profile(metrics)
    print(format_rows(rows, wall))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "command": ["ms-run", *args.overrides],
                    "wall_seconds": round(wall, 1),
                    "run_wall_seconds": metrics.get("wall_seconds"),
                    "commit": metrics["provenance"].get("commit"),
                    "dirty": metrics["provenance"].get("dirty"),
                    "cpus": os.cpu_count(),
                    "date": time.strftime("%Y-%m-%d"),
                    "roles": rows,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
