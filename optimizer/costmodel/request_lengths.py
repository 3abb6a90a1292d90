"""Prompt and output token lengths of named serving datasets, each from a published trace or from the benchmark code
that draws it [issue 55 §1].

A measured dataset is an empirical quantile table (QUANTILES of its prompt and of its output lengths, computed from
the cited per-request trace) read as a piecewise-linear inverse CDF: a draw is exact at the table's quantiles and
linear between them. Prompt and output are drawn independently (in the ShareGPT trace below their correlation is
0.04). The table gives the SHAPE: a workload naming a dataset keeps its own prompt_len and output_len as the means
(what `vllm bench serve` reports as total tokens / completed requests), and the table is scaled to them, since the
tokenizer and the release of a dataset move its absolute lengths (the project's quarantined ShareGPT runs average
217 prompt tokens on Qwen3 where the trace below averages 378 on Llama-2's tokenizer).

Synthetic datasets are drawn as their benchmark draws them: `random` as vLLM's RandomDataset (uniform integers in
[floor(L (1 - r)), ceil(L (1 + r))] around the requested length L, range ratio r; vLLM's default r = 0, every request
exactly L), `sonnet` at its requested lengths (--sonnet-input-len / --sonnet-output-len; the spread whole sonnet lines
give a prompt around its requested length, and its 200-token shared prefix, are not modelled).

Left out, no per-request figures found: LMSys-Chat-1M (its paper's Table 1 gives means only), ShareGPT V3 as `vllm
bench serve` samples it (first turn, ShareGPT_V3_unfiltered_cleaned_split.json; no published quantiles: `sharegpt`
below is the ShareGPT4 trace filtered by the bench's own rule, see its source), Mooncake (a trace: pass the file
as --workload-trace, optimizer/spec/workload_trace.py reads it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optimizer.errors import DomainError
from optimizer.spec.workload import InferenceWorkload

QUANTILES: tuple[float, ...] = (0, 1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 100)
"""Percentiles of every table (numpy.percentile, linear), 0 and 100 the trace's minimum and maximum."""

# vLLM vllm/benchmarks/datasets.py (vllm-project/vllm 0056b87f): RandomDataset.DEFAULT_RANGE_RATIO = 0.0,
# DEFAULT_INPUT_LEN 1024, DEFAULT_OUTPUT_LEN 128; add_dataset_parser: --sonnet-input-len 550, --sonnet-output-len 150,
# --sonnet-prefix-len 200. is_valid_sequence (vllm/benchmarks/datasets.py, since moved to dataset_utils.py, which
# 0056b87f imports it from): ShareGPT samples are kept when prompt and output >= 4 tokens, prompt <= 1024 and prompt +
# output <= 2048.
VLLM_RANDOM_RANGE_RATIO = 0.0
VLLM_SHAREGPT_MIN_LEN, VLLM_SHAREGPT_MAX_PROMPT, VLLM_SHAREGPT_MAX_TOTAL = 4, 1024, 2048


@dataclass(frozen=True)
class LengthTable:
    """A dataset's measured prompt and output lengths: values at QUANTILES, tokens."""

    name: str
    prompt: tuple[int, ...]
    output: tuple[int, ...]
    requests: int
    """Requests in the trace the table was computed from."""
    source: str

    def mean(self, which: str) -> float:
        """The mean of the piecewise-linear distribution the table defines (what a draw averages)."""
        q = np.asarray(self.prompt if which == "prompt" else self.output, dtype=float)
        p = np.asarray(QUANTILES) / 100
        return float(np.sum((q[1:] + q[:-1]) / 2 * np.diff(p)))

    def cv(self, which: str) -> float:
        """Standard deviation / mean of the piecewise-linear distribution (uniform between adjacent quantiles)."""
        q = np.asarray(self.prompt if which == "prompt" else self.output, dtype=float)
        dp = np.diff(np.asarray(QUANTILES) / 100)
        a, b = q[:-1], q[1:]
        second = float(np.sum(dp * (a * a + a * b + b * b) / 3))
        mean = self.mean(which)
        return math.sqrt(max(0.0, second - mean * mean)) / mean

    def quantile(self, which: str, u: np.ndarray) -> np.ndarray:
        """Lengths at probabilities u (0..1), before scaling."""
        q = np.asarray(self.prompt if which == "prompt" else self.output, dtype=float)
        out: np.ndarray = np.interp(u, np.asarray(QUANTILES) / 100, q)
        return out


# Sarathi-Serve (Agrawal et al., OSDI 2024) Table 3, openchat_sharegpt4 (prompt median 1730, P90 5696; output median
# 415, P90 834): the trace microsoft/sarathi-serve 72339db data/processed_traces/
# sharegpt_8k_filtered_stats_llama2_tokenizer.csv (30,731 requests, Llama-2 tokenizer, total <= 8k), whose quantiles
# these are (the table's medians and P90s are the paper's).
OPENCHAT_SHAREGPT4 = LengthTable(
    "openchat-sharegpt4",
    prompt=(1, 12, 29, 74, 382, 777, 1203, 1730, 2401, 3235, 4278, 5696, 6563, 7434, 8141),
    output=(2, 6, 44, 84, 181, 271, 346, 415, 493, 581, 683, 834, 920, 998, 1024),
    requests=30731,
    source="Sarathi-Serve OSDI'24 Table 3; microsoft/sarathi-serve 72339db "
    "data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
)

# The same trace kept by `vllm bench serve`'s ShareGPT filter (is_valid_sequence above: 11,035 of its 30,731 requests):
# ShareGPT as the bench prunes it (prompt mean 378, median 297, P90 878; output mean 419, median 402, P90 817).
SHAREGPT = LengthTable(
    "sharegpt",
    prompt=(4, 9, 16, 23, 44, 86, 165, 297, 453, 596, 732, 878, 949, 1009, 1024),
    output=(4, 11, 38, 66, 134, 235, 330, 402, 478, 566, 663, 817, 907, 994, 1024),
    requests=11035,
    source="microsoft/sarathi-serve 72339db sharegpt_8k_filtered_stats_llama2_tokenizer.csv, kept by vLLM "
    "is_valid_sequence (prompt, output >= 4; prompt <= 1024; total <= 2048)",
)

# arXiv summarization as Vidur and Sarathi-Serve serve it: microsoft/vidur 7d47513 data/processed_traces/
# arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv (28,257 requests, Llama-2 tokenizer, total <= 4096:
# prompt mean 2588, median 2730, P90 3702; output mean 291, median 167, P90 372).
ARXIV_SUMMARIZATION = LengthTable(
    "arxiv-summarization",
    prompt=(1, 73, 749, 1242, 1802, 2150, 2453, 2730, 2996, 3249, 3490, 3702, 3813, 3933, 4054),
    output=(5, 36, 60, 78, 104, 125, 145, 167, 192, 222, 268, 372, 736, 3271, 4056),
    requests=28257,
    source="microsoft/vidur 7d47513 data/processed_traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
)

# Splitwise (Patel et al., ISCA 2024) §III: Azure LLM inference trace 2023, conversation median prompt 1020 and output
# 129 tokens, coding median prompt 1500 and output 13; the traces as microsoft/vidur 7d47513 ships them
# (data/processed_traces/splitwise_conv.csv, 19,366 requests; splitwise_code.csv, 8,819), whose quantiles these are.
AZURE_CONV_2023 = LengthTable(
    "azure-conv-2023",
    prompt=(2, 29, 181, 207, 387, 403, 703, 1020, 1071, 1130, 1315, 2734, 4083, 4142, 14050),
    output=(7, 16, 41, 54, 77, 91, 103, 129, 177, 384, 400, 424, 451, 601, 1000),
    requests=19366,
    source="Splitwise ISCA'24 §III; microsoft/vidur 7d47513 data/processed_traces/splitwise_conv.csv",
)
AZURE_CODE_2023 = LengthTable(
    "azure-code-2023",
    prompt=(3, 17, 75, 147, 386, 770, 1075, 1469, 1909, 2433, 3192, 5188, 7303, 7436, 7437),
    output=(6, 6, 6, 7, 8, 9, 11, 13, 16, 20, 29, 55, 90, 251, 1899),
    requests=8819,
    source="Splitwise ISCA'24 §III; microsoft/vidur 7d47513 data/processed_traces/splitwise_code.csv",
)

TABLES: dict[str, LengthTable] = {
    t.name: t for t in (SHAREGPT, OPENCHAT_SHAREGPT4, ARXIV_SUMMARIZATION, AZURE_CONV_2023, AZURE_CODE_2023)
}
SYNTHETIC = ("random", "sonnet")
"""Drawn as vLLM's benchmark draws them (module docstring)."""
DATASETS: tuple[str, ...] = (*TABLES, *SYNTHETIC)


def check_dataset(name: str) -> str:
    """`name` if it is a known dataset, else a DomainError listing them."""
    if name not in DATASETS:
        raise DomainError("workload.length_distribution", f"must be one of {', '.join(DATASETS)} (got {name!r})")
    return name


def draw_lengths(
    name: str, rng: np.random.Generator, n: int, prompt_mean: int, output_mean: int
) -> tuple[np.ndarray, np.ndarray]:
    """n (prompt, output) lengths of dataset `name`, scaled so that their means are prompt_mean and output_mean (a
    measured table), or as the benchmark draws its synthetic dataset at those lengths; at least 1 token each."""
    check_dataset(name)
    if name == "random":
        return _vllm_random(rng, n, prompt_mean, VLLM_RANDOM_RANGE_RATIO), _vllm_random(
            rng, n, output_mean, VLLM_RANDOM_RANGE_RATIO
        )
    if name == "sonnet":
        return np.full(n, prompt_mean, dtype=np.int64), np.full(n, output_mean, dtype=np.int64)
    table = TABLES[name]
    return _scaled(table, "prompt", rng.random(n), prompt_mean), _scaled(table, "output", rng.random(n), output_mean)


def _scaled(table: LengthTable, which: str, u: np.ndarray, mean: int) -> np.ndarray:
    x = table.quantile(which, u) * (mean / table.mean(which))
    return np.maximum(1, np.rint(x)).astype(np.int64)


def _vllm_random(rng: np.random.Generator, n: int, length: int, ratio: float) -> np.ndarray:
    """vLLM RandomDataset.get_sampling_params: integers uniform in [floor(L(1-r)), ceil(L(1+r))], at least 1."""
    low = max(1, math.floor(length * (1 - ratio)))
    high = max(low, math.ceil(length * (1 + ratio)))
    return rng.integers(low, high + 1, size=n).astype(np.int64)


def length_spreads(w: InferenceWorkload) -> tuple[float, float]:
    """(prompt, output) coefficients of variation the workload's requests have: its trace's, its named dataset's
    (a measured table's piecewise-linear distribution; vLLM random at r = 0 and sonnet: 0), else its own fields."""
    if w.workload_trace is not None:
        p = np.array([r.input_tokens for r in w.workload_trace], dtype=float)
        o = np.array([r.output_tokens for r in w.workload_trace], dtype=float)
        return float(p.std() / p.mean()), float(o.std() / o.mean())
    name = w.length_distribution
    if name is None:
        return w.prompt_len_cv, w.output_len_cv
    if name in SYNTHETIC:
        return 0.0, 0.0
    table = TABLES[name]
    return table.cv("prompt"), table.cv("output")
