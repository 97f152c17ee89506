"""The chapter protocol, and the pieces every chapter shares.

A chapter is a notebook ``book/<name>.ipynb`` and a module :mod:`geocont.chapters.<name>` that
defines ``CHAPTER``, a :class:`Chapter`: its name, its parameters (with their help), its preset
per scale (the values of its settings), a ``build`` function that turns the values into the
chapter's settings (checking them), and a ``describe`` function that says what the settings run.
:class:`Chapter` provides, once for every chapter:

* ``configure(scale="smoke", **params)``: the preset of ``scale``, each parameter that is set (not
  None) replacing its value, built into settings before any work; a bad name or value raises
  :class:`geocont.scales.ParameterError` with a one-line message;
* ``from_notebook(namespace)``: ``configure`` from the notebook's variables (the notebook's one
  configure call);
* ``provenance(settings)``: the table of what produced the chapter, and the re-run commands;
* ``publish(settings, claims)``: the claims table, for the book's closing chapter;
* ``run_configs(settings)``: every run configuration the chapter will train (empty where the
  chapter trains nothing itself), so that their inputs can be checked before the first run.

Besides ``CHAPTER``, the module holds one function per result the notebook shows (runs, figures
through :func:`geocont.book.figures.show_figure`, tables, computed prose as
:class:`IPython.display.Markdown`), and ``claims(results)``: the claims table, built with
:class:`ClaimsBuilder`, each claim under a stable key. The notebook calls these in the order a
reader meets them and holds nothing but prose.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from IPython.display import Markdown

from ..metrics import DEGENERACY_TOL
from ..scales import SCALES, ParameterError, check_scale, parameter_errors
from ..statistics import Estimate, undefined_pairs
from ..tables import CLAIM_COLUMNS, CLAIM_KEY_SEPARATOR, claim_key, claim_row, split_claim_key
from .claims import early_text, estimate_text
from .claims import publish as publish_claims
from .notebook import notebook_parameters, one_line_parameter_errors
from .prose import NOT_TESTED_CHOICE, ClaimWording, Prose
from .provenance import provenance_markdown

#: The words of the sentences every chapter shares (``src/geocont/book/prose.md``).
_PROSE = Prose.of(__package__)

#: A chapter's presets: a function of the scale that returns ``{setting: value}``, built by :func:`presets`.
Presets = Callable[[str], dict[str, Any]]


def presets(
    base: Presets | None = None,
    per_scale: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    keep: tuple[str, ...] | None = None,
    without: tuple[str, ...] = (),
    **values: Any,
) -> Presets:
    """A chapter's presets, the one way every chapter builds them: the shared presets ``base(scale)``
    (the MLP or language-model family's, read when the chapter is configured, so that a change there
    reaches every chapter built on it), only the settings in ``keep`` (all if None) and none in
    ``without``, then ``values`` (every scale) and ``per_scale[scale]`` added or replaced."""
    per_scale = {scale: dict(v) for scale, v in (per_scale or {}).items()}
    unknown = sorted(set(per_scale) - set(SCALES))
    if unknown:
        raise ValueError(f"presets for unknown scale(s) {', '.join(unknown)}; valid choices: {', '.join(SCALES)}")

    def preset(scale: str) -> dict[str, Any]:
        shared = dict(base(scale)) if base is not None else {}
        shared = {k: v for k, v in shared.items() if (keep is None or k in keep) and k not in without}
        return {**shared, **values, **per_scale.get(scale, {})}

    return preset


def preset_values(
    presets: Presets, scale: str, params: Mapping[str, Any], parameters: Mapping[str, str]
) -> dict[str, Any]:
    """The router every chapter shares: the preset of ``scale`` with each parameter that is set
    (not None) replacing its value. A name outside ``parameters`` raises :class:`ParameterError`."""
    check_scale(scale)
    unknown = sorted(set(params) - set(parameters) - {"scale"})
    if unknown:
        raise ParameterError(f"unknown parameter(s) {', '.join(unknown)}; valid choices: {', '.join(parameters)}")
    preset = presets(scale)
    return {
        **preset,
        **{
            name: _as_list_if_listed(name, value, preset.get(name))
            for name, value in params.items()
            if value is not None
        },
    }


def _number_if_numeric(value: Any) -> Any:
    """Text that is a number (``papermill -r steps 20`` passes "20") as that number; any other value unchanged."""
    if not isinstance(value, str):
        return value
    try:
        parsed = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value
    return parsed if isinstance(parsed, (int, float)) and not isinstance(parsed, bool) else value


def _as_list_if_listed(name: str, value: Any, preset_value: Any) -> Any:
    """A parameter as given. Text (plain ``papermill -p`` and ``-r`` pass text) is read as the book's command line
    reads it: where the preset is not a list, a number as that number unless the preset is text
    (:func:`_number_if_numeric`); where it is a list, a Python list literal as the list, a number as that number,
    other text as a name.
    One value that is not a list is then a list of that one value (``-p conditions res-none``), except for a
    seed parameter (its name ends in ``seeds``), where a whole number n is a count, seeds 0..n-1
    (:func:`geocont.scales.parse_seeds`): ``-p seeds 3`` and ``-p seeds "'3'"`` both mean seeds 0, 1, 2."""
    if not isinstance(preset_value, (tuple, list)):
        return _number_if_numeric(value) if not isinstance(preset_value, str) else value
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            parsed = None
        if text.startswith(("[", "(")):
            if parsed is None:
                raise ParameterError(f"{name}: cannot read {value!r} as a list (write it like \"['a', 'b']\")")
            if not isinstance(parsed, (tuple, list)):
                raise ParameterError(f"{name}: {value!r} is not a list")
            return parsed
        if not isinstance(parsed, (int, float)) or isinstance(parsed, bool):
            return (text,)
        value = parsed
    if name.endswith("seeds") or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes))):
        return value
    return (value,)


@dataclass(frozen=True)
class Chapter:
    """One chapter of the book (see the module docstring): what it is called, what a reader may set,
    the values each scale sets, and how they become the chapter's settings.

    ``presets(scale)`` gives the values of the chapter's settings at ``scale`` (:func:`presets`);
    ``build(scale, values)`` returns the settings (a frozen dataclass with ``scale`` and
    ``overrides`` fields) and raises ``ValueError``/``TypeError`` on a bad value; ``describe(settings)``
    returns the provenance rows ``seeds``, ``data``, ``model`` and ``training``; ``runs(settings)``
    lists every run configuration the chapter trains (None: it trains none itself);
    ``scale_rows(settings)`` gives the chapter's rows of the methods page's table of the scales,
    ``[(setting, value at this scale)]`` (None: the chapter adds none).
    """

    name: str
    #: ``{parameter: one-line help}`` in the order of the notebook's parameters cell, ``scale`` first
    parameters: dict[str, str]
    #: ``scale -> {setting: value}`` (:func:`presets`); a parameter that is set replaces its setting's value
    presets: Presets
    build: Callable[[str, dict[str, Any]], Any]
    describe: Callable[[Any], dict[str, Any]]
    runs: Callable[[Any], list] | None = None
    scale_rows: Callable[[Any], list[tuple[str, str]]] | None = None

    def __post_init__(self) -> None:
        if next(iter(self.parameters), None) != "scale":
            raise ValueError(f"chapter {self.name!r}: its first parameter must be scale")
        if not callable(self.presets):
            raise TypeError(f"chapter {self.name!r}: presets must be a function of the scale (book.chapter.presets)")

    @property
    def notebook(self) -> str:
        return f"book/{self.name}.ipynb"

    def configure(self, scale: str = "smoke", **params: Any) -> Any:
        """The chapter's settings at ``scale``, ``params`` replacing preset values (None keeps them);
        every name and value is checked before any work (one-line :class:`ParameterError`)."""
        with parameter_errors():
            values = preset_values(self.presets, scale, params, self.parameters)
            settings = self.build(scale, values)
        return dataclasses.replace(settings, overrides={k: v for k, v in params.items() if v is not None})

    def from_notebook(self, namespace: Mapping[str, Any]) -> Any:
        """:meth:`configure` with the notebook's parameter values (:func:`notebook_parameters`), every
        input of its runs checked (:func:`geocont.preflight.check_settings`); sets the book's figure
        theme for what follows."""
        from .. import plotting, preflight

        one_line_parameter_errors()
        settings = self.configure(**notebook_parameters(namespace, self.parameters))
        preflight.check_settings(settings, self.run_configs(settings))
        plotting.set_theme()
        return settings

    def provenance(self, settings: Any) -> Markdown:
        """What produced the chapter (scale, data, seeds, model, training, hardware), and how to re-run it."""
        return Markdown(
            provenance_markdown(
                notebook=self.notebook,
                scale=settings.scale,
                overrides=settings.overrides,
                runs=self.run_configs(settings),
                **self.describe(settings),
            )
        )

    def publish(self, settings: Any, claims: pd.DataFrame) -> None:
        """Publish the claims table for the book's closing chapter."""
        publish_claims(claims, chapter=self.name, scale=settings.scale, overrides=settings.overrides)

    def run_configs(self, settings: Any) -> list:
        """Every run configuration the chapter will train (MLPRunConfig / LMRunConfig), in order."""
        return list(self.runs(settings)) if self.runs else []

    def scales_table_rows(self) -> list[tuple[str, ...]]:
        """The chapter's rows of the table of the scales: ``(setting, value at each scale, ...)``."""
        if self.scale_rows is None:
            return []
        per_scale = [self.scale_rows(self.configure(scale)) for scale in SCALES]
        labels = [label for label, _ in per_scale[0]]
        for scale, rows in zip(SCALES, per_scale):
            if [label for label, _ in rows] != labels:
                raise ValueError(f"chapter {self.name!r}: its scale rows at {scale} differ from those at {SCALES[0]}")
        return [(label, *(str(rows[i][1]) for rows in per_scale)) for i, label in enumerate(labels)]


def seeds_text(seeds: Any) -> str:
    """``3 (0, 1, 2)``: a count of seeds and the seeds (an int n means seeds 0..n-1)."""
    seeds = tuple(range(seeds)) if isinstance(seeds, int) else tuple(seeds)
    return f"{len(seeds)} ({', '.join(map(str, seeds))})"


#: How the note of a row shown but not counted starts (:class:`ClaimsBuilder`'s ``not_counted``).
NOT_COUNTED = "not counted: "


class ClaimsBuilder:
    """Collects one chapter's claims, each under a stable key, into a claims table.

    A claim's words come from the chapter's ``prose`` (template ``claim.<name>``, see
    :mod:`geocont.book.prose`); its code gives only the values. ``dataset`` is the chapter's headline
    dataset (a corpus or model name for the chapters that train no MLP, e.g. ``"kjv"``): every claim is
    judged on it unless :meth:`add` names another, and a claim's row on it is the claim's verdict of record
    (``primary``). A row's key is :func:`claim_key` of the claim's name and its dataset
    (``linear-weight-v1@mnist-10k``). A chapter that names no dataset ("", the default) keeps the plain
    names as keys, every row primary. ``not_counted``: claims another chapter owns, or variants of a claim of
    record (never primary, so that the closing chapter counts each claim once).
    """

    def __init__(
        self,
        chapter: str,
        dataset: str = "",
        *,
        prose: Prose,
        not_counted: Mapping[str, str] | None = None,
        unit: str = "seeds",
    ) -> None:
        claim_key("chapter", dataset)  # checks the dataset's name
        self.chapter = chapter
        self.dataset = dataset
        self.prose = prose
        #: ``{claim name: why it is not counted}``: claims this chapter shows that another chapter owns (judged there
        #: on the same runs by the same rule), or variants of a claim of record; their rows are never primary, and
        #: their notes say why
        self.not_counted = dict(not_counted or {})
        #: what a claim's ``n`` counts unless :meth:`add` names another unit
        self.unit = unit
        self.rows: list[dict[str, Any]] = []

    def add(
        self,
        *,
        key: str,
        ours: Estimate | float,
        baseline: float,
        verdict: str,
        fill: Mapping[str, Any] | None = None,
        template: str | None = None,
        std: float | None = None,
        n: int | None = None,
        headline: bool = False,
        dataset: str | None = None,
        unit: str | None = None,
    ) -> None:
        """One claim, worded by its template ``claim.<template>`` (``template`` defaults to ``key``) filled
        with ``fill``. ``ours`` is an :class:`Estimate` (mean, sd, n) or a bare number, whose ``std`` and
        ``n`` are then given (``std`` and ``n`` also override an estimate's). ``headline``: one of the book's
        headline claims. ``dataset``: the dataset it was judged on, the builder's headline dataset by
        default; the row is primary where it is that one. ``unit``: what ``n`` counts (the builder's unit by
        default)."""
        words = self.prose.claim(template or key, **(fill or {}))
        self._row(
            key=key,
            words=words,
            ours=ours,
            baseline=baseline,
            verdict=verdict,
            std=std,
            n=n,
            headline=headline,
            dataset=dataset,
            unit=unit,
        )

    def not_tested(
        self,
        *,
        key: str,
        reason: str,
        fill: Mapping[str, Any] | None = None,
        template: str | None = None,
        baseline: float = math.nan,
        dataset: str | None = None,
        headline: bool = False,
    ) -> None:
        """A claim the chapter could not judge here: its row has no value of ours (NaN, n = 0) and the
        verdict "not tested"; its note is the ``not-tested.<reason>`` template, filled with ``fill`` (its lines
        joined with a space, as a claim's parts are)."""
        fill = fill or {}
        words = dataclasses.replace(
            self.prose.claim(template or key, note=False, **fill),
            note=" ".join(self.prose.choose(NOT_TESTED_CHOICE, reason, **fill).split("\n")),
        )
        self._row(
            key=key,
            words=words,
            ours=Estimate(math.nan, math.nan, 0),
            baseline=baseline,
            verdict="not tested",
            headline=headline,
            dataset=dataset,
        )

    def _row(
        self,
        *,
        key: str,
        words: ClaimWording,
        ours: Estimate | float,
        baseline: float,
        verdict: str,
        std: float | None = None,
        n: int | None = None,
        headline: bool,
        dataset: str | None,
        unit: str | None = None,
    ) -> None:
        dataset = self.dataset if dataset is None else dataset
        full_key = claim_key(key, dataset)
        if any(row["key"] == full_key for row in self.rows):
            raise ValueError(f"claim key {full_key!r} is used twice in chapter {self.chapter!r}")
        note = words.note
        if key in self.not_counted:
            why = f"{NOT_COUNTED}{self.not_counted[key]}"
            note = f"{why}; {note}" if note else why
        if isinstance(ours, Estimate):
            mean, spread, count = ours.mean, ours.std, ours.n
            if ours.n_diverged:  # "2 of 8 seeds diverged": diverged runs are left out of the estimate
                note = f"{note}; {ours.diverged_text}" if note else ours.diverged_text
        else:
            mean, spread, count = float(ours), math.nan, 0
        self.rows.append(
            claim_row(
                chapter=self.chapter,
                claim=words.claim,
                quantity=words.quantity,
                paper=words.paper,
                ours_mean=mean,
                ours_std=spread if std is None else std,
                n_seeds=count if n is None else n,
                baseline=baseline,
                verdict=verdict,
                note=note,
                key=key,
                dataset=dataset,
                primary=dataset == self.dataset and key not in self.not_counted,
                headline=headline,
                n_unit=unit or self.unit,
            )
        )

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=CLAIM_COLUMNS)


def concat_claims(first: pd.DataFrame, *more: pd.DataFrame) -> pd.DataFrame:
    """Claims tables one after another (empty ones left out: their all-NA columns would change the dtypes)."""
    return pd.concat([first, *(frame for frame in more if len(frame))], ignore_index=True)


def claim(claims: pd.DataFrame, key: str, dataset: str | None = None) -> pd.Series:
    """The row of ``claims`` with this key: a full key (``linear-weight-v1@mnist-10k``), a claim's name
    and ``dataset`` (``claim(claims, "res-none-falls", dataset="mnist-10k")``), or a name alone, which
    means the claim's primary row (its verdict on the chapter's headline dataset). An unknown key lists
    the known ones."""
    if CLAIM_KEY_SEPARATOR in key or dataset is not None:
        name, in_key = split_claim_key(key) if CLAIM_KEY_SEPARATOR in key else (key, "")
        if dataset is not None and in_key and in_key != dataset:
            raise ValueError(f"claim key {key!r} names dataset {in_key!r}, not {dataset!r}")
        rows = claims[claims["key"] == claim_key(name, in_key or dataset)]
    else:
        names = claims["key"].map(lambda k: split_claim_key(k)[0])
        primary = claims["primary"].astype(bool) if "primary" in claims else True
        rows = claims[(names == key) & primary]
    if len(rows) != 1:
        wanted = repr(key) + ("" if dataset is None else f" on {dataset!r}")
        raise KeyError(f"no claim {wanted}; keys: {', '.join(claims['key'])}")
    return rows.iloc[0]


def on_dataset(claims: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """``claims`` (built without a dataset) judged on ``dataset``: every key names it, and every row is its
    claim's verdict of record (a chapter that judges each claim on one dataset names it once, here), as built: a row
    built as not counted (:class:`ClaimsBuilder`'s ``not_counted``) stays so."""
    keys = [claim_key(split_claim_key(key)[0], dataset) for key in claims["key"]]
    return claims.assign(key=keys, dataset=dataset, primary=claims["primary"].astype(bool))


def has_claim(claims: pd.DataFrame, key: str, dataset: str | None = None) -> bool:
    """Whether :func:`claim` finds this key (a full key, a name and ``dataset``, or a name's primary row)."""
    try:
        claim(claims, key, dataset)
    except KeyError:
        return False
    return True


def ours_text(row: Any) -> str:
    """``0.42 ± 0.03, n = 3`` for a claims row (no ± where the spread is undefined)."""
    return estimate_text(row.ours_mean, row.ours_std, row.n_seeds)


def verdict_list(claims: pd.DataFrame, intro: str) -> str:
    """``intro`` and one bullet per claim on its verdict of record (its primary row): verdict, claim, quantity,
    the paper's number, ours, the claim's note (the estimates behind a comparison) where it has one, its early
    value, and the same claim's verdicts on the other datasets it was judged on."""
    names = [split_claim_key(key)[0] for key in claims["key"]]
    others: dict[str, list[str]] = {}
    for name, row in zip(names, claims.itertuples()):
        if not _primary(row):
            others.setdefault(name, []).append(
                _PROSE.render("verdict-other-dataset", dataset=row.dataset, verdict=row.verdict, ours=ours_text(row))
            )
    lines = [
        _PROSE.render(
            "verdict-item",
            verdict=row.verdict,
            claim=row.claim,
            quantity=row.quantity,
            paper=row.paper,
            ours=ours_text(row),
            note=f"; {row.note}" if row.note else "",
            early=f"; {early_text(row)}" if early_text(row) else "",
            others=_PROSE.render("verdict-others", others="; ".join(others[name])) if name in others else "",
        )
        for name, row in zip(names, claims.itertuples())
        if _primary(row)
    ]
    return intro + "\n\n" + "\n".join(lines)


def _primary(row: Any) -> bool:
    """Whether a claims row (from ``itertuples``) is its claim's verdict of record (tables without the column: all)."""
    return bool(getattr(row, "primary", True))


def with_early(claims: pd.DataFrame, early_claims: pd.DataFrame, steps: int) -> pd.DataFrame:
    """``claims`` (judged at the chapter's horizon) with the ``early_*`` columns filled from
    ``early_claims``: the same claims, under the same full keys (name and dataset), judged after ``steps`` steps."""
    early = early_claims.set_index("key")
    missing = sorted(set(claims["key"]) - set(early.index))
    if missing:
        raise KeyError(f"no early value for claim(s) {', '.join(missing)}")
    keys = claims["key"]
    return claims.assign(
        early_mean=keys.map(early["ours_mean"]),
        early_sd=keys.map(early["ours_std"]),
        early_n=keys.map(early["n_seeds"]),
        early_step=steps,
        early_verdict=keys.map(early["verdict"]),
    )


def changed_verdicts(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims whose verdict at the horizon differs from their early verdict (``early_verdict``)."""
    early_verdict = claims["early_verdict"].fillna("")
    return claims[(early_verdict != "") & (early_verdict != claims["verdict"])]


def changed_verdicts_sentence(claims: pd.DataFrame, steps: int) -> str:
    """The claims whose verdict differs between ``steps`` steps (their ``early_verdict`` column) and the end
    of training, as one bold-led sentence; or a sentence saying none did."""
    changed = changed_verdicts(claims)
    if not len(changed):
        return _PROSE.choose("changed-verdicts", "none", steps=steps)
    return _PROSE.choose(
        "changed-verdicts",
        "some",
        steps=steps,
        changed="; ".join(
            _PROSE.render(
                "changed-verdict-item",
                claim=row.claim,
                quantity=row.quantity,
                early=row.early_verdict,
                final=row.verdict,
                dataset=f" on `{row.dataset}`" if getattr(row, "dataset", "") else "",
            )
            for row in changed.itertuples()
        ),
    )


#: The claims columns a chapter's table shows no column of its own for (the early value is shown as one text column).
_HIDDEN_CLAIM_COLUMNS = [
    "chapter",
    "early_mean",
    "early_sd",
    "early_n",
    "early_step",
    "early_verdict",
    "headline",
    "primary",
]


def claims_display(claims: pd.DataFrame):
    """The claims table as the chapters show it (a pandas Styler): the early value as one text column;
    the dataset column only where some claim names one."""
    hidden = _HIDDEN_CLAIM_COLUMNS + ([] if (claims["dataset"].fillna("") != "").any() else ["dataset"])
    shown = claims.assign(early=[early_text(row) for row in claims.itertuples()]).drop(columns=hidden)
    return shown.style.format(precision=3, na_rep="–").hide(axis="index")


def undefined_sentence(table: pd.DataFrame) -> str:
    """One sentence on the compared pairs whose singular direction was undefined (left out of the means)."""
    counts = undefined_pairs(table)
    total, undefined = int(counts["pairs"].sum()), int(counts["undefined"].sum())
    if undefined == 0:
        return _PROSE.choose("undefined", "none", total=total, tol=DEGENERACY_TOL)
    which = ", ".join(f"{r.metric} ({r.space}) {r.undefined} of {r.pairs}" for r in counts.itertuples() if r.undefined)
    return _PROSE.choose("undefined", "some", undefined=undefined, total=total, tol=DEGENERACY_TOL, which=which)
