"""Generation throughput of the default backbone (tokens/s) at batch sizes 1, 8 and 16.

    make bench            # or: python benchmarks/generation_throughput.py [--server]

`hf` runs SmolLM2-135M in-process with transformers; `--server` also measures the same GGUF
behind llama-cpp-python's OpenAI-compatible server, through the `openai` provider (concurrency =
batch size). The response cache is off, so every token is really generated.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from conftest import compose_config, free_port, gguf_path  # noqa: E402

from ms.llm import build_lm  # noqa: E402
from ms.llm.openai import OpenAILM  # noqa: E402

TOPICS = ["the sea", "a city at night", "autumn", "a lost key", "coffee", "mountains", "a robot", "rain",
          "a library", "trains", "the moon", "a garden", "snow", "friendship", "a market", "bees"]


def measure(lm, batch_size: int, max_new_tokens: int, rounds: int) -> float:
    prompts = [f"Write a short paragraph about {t}." for t in TOPICS * 4][: batch_size * rounds]
    before = lm.usage.completion_tokens
    started = time.perf_counter()
    for i in range(0, len(prompts), batch_size):
        lm.generate(prompts[i:i + batch_size], max_new_tokens=max_new_tokens)
    return (lm.usage.completion_tokens - before) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2, help="batches per batch size")
    parser.add_argument("--server", action="store_true", help="also measure llama.cpp's server")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, max_new_tokens={args.max_new_tokens}")
    with tempfile.TemporaryDirectory() as cache:
        cfg = compose_config()
        hf = build_lm(cfg.backbone, cache, use_response_cache=False)
        hf.generate(["warm up"], max_new_tokens=4)
        for bs in (1, 8, 16):
            hf.batch_size = bs
            print(f"hf      batch {bs:2d}: {measure(hf, bs, args.max_new_tokens, args.rounds):7.1f} tokens/s")
    if args.server:
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()),
                                   "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
                                   "--n_threads", str(torch.get_num_threads())],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(240):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1)
                    break
                except OSError:
                    time.sleep(0.5)
            for bs in (1, 8, 16):
                lm = OpenAILM("smollm2", base_url=f"http://127.0.0.1:{port}/v1", max_concurrency=bs)
                print(f"llama.cpp server, concurrency {bs:2d}: "
                      f"{measure(lm, bs, args.max_new_tokens, args.rounds):7.1f} tokens/s")
        finally:
            server.terminate()


if __name__ == "__main__":
    main()
