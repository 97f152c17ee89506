"""Weight-naming layouts: which tensor of a checkpoint is which (layer, projection).

A :class:`Layout` is a list of :class:`Rule` s, each a regular expression over tensor names with a
``(?P<layer>\\d+)`` group and the projection it names (one of :data:`PROJECTIONS`); a rule can say that the
tensor is stored ``[in, out]`` and that it is one part of a fused matrix. :func:`detect_layout` picks the
registered layout (:data:`LAYOUTS`) that matches most tensors; docs/design.md ("Checkpoints and layouts")
lists them. To add a layout, register it::

    from geocont.layouts import Layout, Rule, register_layout
    register_layout(Layout("mymodel", rules=(
        Rule(r"blocks\\.(?P<layer>\\d+)\\.attn\\.wq\\.weight$", "q_proj"), ...)))
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

#: The seven Llama-family projections every layout maps onto (the analyzer's and the trainer's names).
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class UnknownLayout(ValueError):
    """No registered layout matches a checkpoint (the message lists them and how to add one)."""


class IncompleteLayers(ValueError):
    """A projection's layers cannot be compared: fewer than two, or a gap in their numbering."""


def missing_layers(layers) -> list[int]:
    """Layer numbers absent from ``0 .. max(layers)`` (a gap at the start or in the middle)."""
    present = set(layers)
    return sorted(set(range(max(present) + 1)) - present) if present else []


@dataclass(frozen=True)
class Rule:
    """One tensor-name pattern and the projection it holds."""

    pattern: str  # searched in each name; must contain a (?P<layer>\d+) group
    projection: str
    transpose: bool = False  # stored [in, out] (Conv1D): transpose to [out, in]
    part: tuple[int, int] | None = None  # (index, count): this projection's block of rows of a fused matrix

    def __post_init__(self) -> None:
        if self.projection not in PROJECTIONS:
            raise ValueError(f"unknown projection {self.projection!r}; valid choices: {', '.join(PROJECTIONS)}")
        if "(?P<layer>" not in self.pattern:
            raise ValueError(f"pattern {self.pattern!r} needs a (?P<layer>\\d+) group")
        re.compile(self.pattern)


@dataclass(frozen=True)
class MatrixRef:
    """Where one (layer, projection) matrix lives and how to turn it into ``[out, in]``."""

    layer: int
    projection: str
    tensor: str
    shape: tuple[int, int]  # [out, in], after transpose and split
    transpose: bool = False
    part: tuple[int, int] | None = None

    def load(self, source) -> torch.Tensor:
        W = source.read(self.tensor)
        if self.transpose:
            W = W.T
        if self.part is not None:
            index, count = self.part
            W = W.chunk(count, dim=0)[index]
        return W.contiguous()


@dataclass(frozen=True)
class Layout:
    """A named set of rules; ``marker`` (a pattern) must also match some tensor name."""

    name: str
    rules: tuple[Rule, ...]
    description: str = ""
    marker: str | None = None
    notes: str = field(default="", compare=False)
    #: norms applied to a projection's *output* before the residual add (Gemma-3's post-norms):
    #: {projection: tensor-name template with {layer}}, and the offset their gain is stored with
    #: (Hugging Face Gemma stores w for a gain 1 + w; llama.cpp's GGUF stores 1 + w itself)
    output_gains: tuple[tuple[str, str], ...] = ()
    gain_offset: float = 0.0

    def find(self, source) -> dict[str, dict[int, MatrixRef]]:
        """``{projection: {layer: MatrixRef}}`` for every tensor the rules match (projections
        in :data:`~geocont.transformer.PROJECTIONS` order); checks shapes and duplicates."""
        found: dict[str, dict[int, MatrixRef]] = {}
        for name in source.names():
            for rule in self.rules:
                match = re.search(rule.pattern, name)
                if match is None:
                    continue
                stored = tuple(source.shape(name))
                if len(stored) != 2:
                    raise ValueError(f"{name}: expected a 2-D weight matrix, got shape {stored}")
                out_dim, in_dim = stored[::-1] if rule.transpose else stored
                if rule.part is not None:
                    index, count = rule.part
                    if out_dim % count:
                        raise ValueError(f"{name}: cannot split {out_dim} rows into {count} equal parts")
                    out_dim //= count
                layer = int(match.group("layer"))
                ref = MatrixRef(layer, rule.projection, name, (out_dim, in_dim), rule.transpose, rule.part)
                if layer in found.setdefault(rule.projection, {}):
                    raise ValueError(
                        f"layout {self.name!r}: two tensors for {rule.projection} of layer {layer} "
                        f"({found[rule.projection][layer].tensor}, {name})"
                    )
                found[rule.projection][layer] = ref
        return {p: dict(sorted(found[p].items())) for p in PROJECTIONS if p in found}

    def matrices(self, source) -> dict[str, list[MatrixRef]]:
        """``{projection: [MatrixRef per layer, in layer order]}``; a gap in the layer numbering
        (at the start or in the middle) is an :class:`IncompleteLayers` error."""
        result = {}
        for projection, layers in self.find(source).items():
            missing = missing_layers(layers)
            if missing:
                raise IncompleteLayers(
                    f"layout {self.name!r}: {projection} is missing layer(s) {missing} "
                    f"(a renamed tensor, a truncated index or an incomplete checkpoint?)"
                )
            result[projection] = list(layers.values())
        return result

    def score(self, names: list[str]) -> int:
        """How many tensor names the rules match (0 if the marker is absent)."""
        if self.marker is not None and not any(re.search(self.marker, n) for n in names):
            return 0
        return sum(1 for n in names if any(re.search(r.pattern, n) for r in self.rules))


def _named_rules(template: str, names: dict[str, str], **options) -> tuple[Rule, ...]:
    return tuple(Rule(template.format(name=name), projection, **options) for projection, name in names.items())


_LLAMA = _named_rules(
    r"(?:^|\.)layers\.(?P<layer>\d+)\.self_attn\.{name}\.weight$",
    {p: p for p in ("q_proj", "k_proj", "v_proj", "o_proj")},
) + _named_rules(
    r"(?:^|\.)layers\.(?P<layer>\d+)\.mlp\.{name}\.weight$", {p: p for p in ("gate_proj", "up_proj", "down_proj")}
)
_GGUF = _named_rules(
    r"^blk\.(?P<layer>\d+)\.{name}\.weight$",
    {
        "q_proj": "attn_q",
        "k_proj": "attn_k",
        "v_proj": "attn_v",
        "o_proj": "attn_output",
        "gate_proj": "ffn_gate",
        "up_proj": "ffn_up",
        "down_proj": "ffn_down",
    },
)
_BERT = _named_rules(
    r"(?:^|\.)layer\.(?P<layer>\d+)\.{name}\.weight$",
    {
        "q_proj": r"attention\.self\.query",
        "k_proj": r"attention\.self\.key",
        "v_proj": r"attention\.self\.value",
        "o_proj": r"attention\.output\.dense",
        "up_proj": r"intermediate\.dense",
        "down_proj": r"output\.dense",
    },
)
_GPT2 = tuple(
    Rule(r"(?:^|\.)h\.(?P<layer>\d+)\.attn\.c_attn\.weight$", p, transpose=True, part=(i, 3))
    for i, p in enumerate(("q_proj", "k_proj", "v_proj"))
) + _named_rules(
    r"(?:^|\.)h\.(?P<layer>\d+)\.{name}\.weight$",
    {"o_proj": r"attn\.c_proj", "up_proj": r"mlp\.c_fc", "down_proj": r"mlp\.c_proj"},
    transpose=True,
)

_GEMMA_NOTE = (
    "extra RMSNorms on the outputs of attention and of the MLP (post_attention_layernorm / "
    "post_feedforward_layernorm), applied before they are added to the residual stream"
)

#: Every registered layout, by name.
LAYOUTS: dict[str, Layout] = {}


def register_layout(layout: Layout, replace: bool = False) -> Layout:
    """Add a layout to :data:`LAYOUTS` (``replace=True`` to redefine an existing name)."""
    if layout.name in LAYOUTS and not replace:
        raise ValueError(f"a layout named {layout.name!r} exists; pass replace=True to redefine it")
    LAYOUTS[layout.name] = layout
    return layout


for _layout in (
    Layout(
        "llama",
        _LLAMA,
        "Hugging Face Llama-family names (Llama, Mistral, Qwen2, SmolLM): "
        "model.layers.N.self_attn.q_proj ... mlp.down_proj",
    ),
    Layout(
        "gemma3",
        _LLAMA,
        "Hugging Face Gemma-3: Llama names, plus post-attention/post-MLP norms",
        marker=r"post_feedforward_layernorm",
        notes=_GEMMA_NOTE,
        output_gains=(
            ("o_proj", "model.layers.{layer}.post_attention_layernorm.weight"),
            ("down_proj", "model.layers.{layer}.post_feedforward_layernorm.weight"),
        ),
        gain_offset=1.0,
    ),
    Layout("gguf", _GGUF, "llama.cpp GGUF names: blk.N.attn_q ... ffn_down"),
    Layout(
        "gemma3-gguf",
        _GGUF,
        "Gemma-3 in GGUF: blk.N.attn_q ... ffn_down, plus post_attention_norm/post_ffw_norm",
        marker=r"^blk\.\d+\.post_ffw_norm\.weight$",
        notes=_GEMMA_NOTE,
        output_gains=(
            ("o_proj", "blk.{layer}.post_attention_norm.weight"),
            ("down_proj", "blk.{layer}.post_ffw_norm.weight"),
        ),
    ),
    Layout(
        "bert",
        _BERT,
        "BERT encoders: encoder.layer.N.attention.self.query/key/value, attention.output.dense, "
        "intermediate.dense (Up), output.dense (Down); no Gate",
    ),
    Layout(
        "gpt2",
        _GPT2,
        "GPT-2: h.N.attn.c_attn (fused Q/K/V, Conv1D [in, out]), attn.c_proj (O), mlp.c_fc (Up), "
        "mlp.c_proj (Down); no Gate",
    ),
):
    register_layout(_layout)

_HOW_TO_ADD = (
    "To add a layout: from geocont.layouts import Layout, Rule, register_layout; "
    "register_layout(Layout('name', rules=(Rule(r'blocks\\.(?P<layer>\\d+)\\.attn\\.wq\\.weight$', 'q_proj'), ...))), "
    "then pass layout='name' (command line: write the registration in a module and run "
    "`python -c 'import mymodule; from geocont.cli import main; main()' analyze ...`)."
)


def _known() -> str:
    return "; ".join(f"{name}: {layout.description}" for name, layout in LAYOUTS.items())


def get_layout(name: str) -> Layout:
    if name not in LAYOUTS:
        raise UnknownLayout(f"unknown layout {name!r}; valid choices: {', '.join(LAYOUTS)}. {_HOW_TO_ADD}")
    return LAYOUTS[name]


def detect_layout(names: list[str], description: str = "the checkpoint") -> Layout:
    """The registered layout that matches most tensor names (a marker wins ties)."""
    scored = [(layout.score(names), layout.marker is not None, layout) for layout in LAYOUTS.values()]
    best = max(scored, key=lambda item: item[:2])
    if best[0] == 0:
        sample = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        raise UnknownLayout(
            f"no known layout matches the tensor names of {description} ({len(names)} tensors: "
            f"{sample}). Known layouts: {_known()}. {_HOW_TO_ADD}"
        )
    return best[2]
