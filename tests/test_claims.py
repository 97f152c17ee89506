"""Chapters publish their claims tables; the closing chapter collects them, or says what is missing."""

import json
import math
import re
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from geocont.book import build, claims, paths  # noqa: E402
from geocont.book.chapter import changed_verdicts, changed_verdicts_sentence  # noqa: E402
from geocont.book.figures import show_figure  # noqa: E402
from geocont.chapters import scales_markdown  # noqa: E402
from geocont.tables import CLAIM_COLUMNS, claim_row  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def frame(chapter: str, verdict: str = "reproduced") -> pd.DataFrame:
    return pd.DataFrame(
        [
            claim_row(
                chapter=chapter,
                claim="A claim",
                quantity="weight v1 |cos|",
                paper="0.93",
                ours_mean=0.9,
                ours_std=0.02,
                n_seeds=3,
                baseline=0.05,
                verdict=verdict,
                key="a-claim",
            ),
            claim_row(
                chapter=chapter,
                claim="A comparison",
                quantity="a minus b",
                paper="higher",
                ours_mean=0.3,
                ours_std=math.nan,
                n_seeds=3,
                baseline=0.05,
                verdict="not reproduced",
                note="a 0.5, b 0.2",
                key="a-comparison",
            ),
        ]
    )


@pytest.fixture
def claims_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.CLAIMS_ENV, str(tmp_path / "claims"))
    return tmp_path / "claims"


def test_published_tables_come_back_in_the_order_asked(claims_dir):
    claims.publish(frame("second"), chapter="second", scale="cpu", overrides={"epochs": 60})
    path = claims.publish(frame("first", "partly reproduced"), chapter="first", scale="cpu")
    assert path == claims_dir / "first.json"
    table = claims.collect("cpu", chapters=["first", "second"])
    assert list(table["chapter"]) == ["first", "first", "second", "second"]
    assert table.loc[0, "verdict"] == "partly reproduced"
    assert math.isnan(table.loc[1, "ours_std"])
    assert set(table["overrides"]) == {"", "epochs=60"}
    assert list(table.columns[: len(CLAIM_COLUMNS)]) == list(frame("x").columns) == CLAIM_COLUMNS


def test_a_missing_chapter_is_named_with_the_command_that_produces_it(claims_dir):
    claims.publish(frame("first"), chapter="first", scale="smoke")
    with pytest.raises(
        claims.MissingClaims, match=r"(?s)chapter\(s\): second\..*book run book/second.ipynb -p scale smoke"
    ):
        claims.collect("smoke", chapters=["first", "second"])


def test_a_corrupt_table_is_reported_not_half_read(claims_dir):
    claims_dir.mkdir(parents=True)
    (claims_dir / "first.json").write_text('{"chapter": "first", "claims": [')
    with pytest.raises(claims.MissingClaims, match="cannot read"):
        claims.collect("cpu", chapters=["first"])


def test_publish_rejects_tables_in_another_format(claims_dir):
    with pytest.raises(ValueError, match="other chapter names"):
        claims.publish(frame("other"), chapter="first", scale="cpu")
    with pytest.raises(ValueError, match="columns"):
        claims.publish(frame("first").drop(columns=["note"]), chapter="first", scale="cpu")
    bad = frame("first")
    bad.loc[0, "verdict"] = "sort of"
    with pytest.raises(ValueError, match="valid choices"):
        claims.publish(bad, chapter="first", scale="cpu")
    bad = frame("first")
    bad.loc[0, "early_verdict"] = "early-ish"
    with pytest.raises(ValueError, match="early-ish.*valid choices"):
        claims.publish(bad, chapter="first", scale="cpu")


def test_the_early_verdict_is_a_column_of_its_own_and_survives_publishing(claims_dir):
    with pytest.raises(ValueError, match="unknown verdict 'early-ish'"):
        claim_row(
            chapter="first",
            claim="A claim",
            quantity="q",
            paper="0.9",
            ours_mean=0.9,
            ours_std=0.0,
            n_seeds=3,
            baseline=0.05,
            verdict="reproduced",
            key="a",
            early_verdict="early-ish",
        )
    early = frame("first").assign(
        early_mean=[0.70, math.nan],
        early_sd=[0.01, math.nan],
        early_n=[3, 0],
        early_step=[930, None],
        early_verdict=["not reproduced", ""],
    )
    claims.publish(early, chapter="first", scale="cpu")
    table = claims.collect("cpu", chapters=["first"])
    assert list(table["early_verdict"]) == ["not reproduced", ""]
    assert table.loc[0, "early_mean"] == 0.70 and table.loc[0, "early_n"] == 3 and table.loc[0, "early_step"] == 930
    assert math.isnan(table.loc[1, "early_mean"]) and table.loc[1, "early_step"] is pd.NA
    changed = changed_verdicts(table)
    assert list(changed["key"]) == ["a-claim"]  # the row without an early verdict is not a change
    assert "A claim (weight v1 |cos|)" in changed_verdicts_sentence(table, 930)  # it renders the changed claim
    assert changed_verdicts_sentence(table.iloc[[1]], 930) != changed_verdicts_sentence(table, 930)


def test_outside_book_builds_tables_go_to_a_folder_per_scale(monkeypatch):
    monkeypatch.delenv(paths.CLAIMS_ENV, raising=False)
    monkeypatch.chdir(ROOT / "book")  # nbval runs a notebook in its own folder
    assert claims.claims_dir("smoke") == ROOT / "_build" / "claims" / "smoke"


def test_markdown_table_links_each_chapter_and_escapes_pipes(claims_dir):
    claims.publish(frame("first"), chapter="first", scale="cpu")
    text = claims.markdown_table(claims.collect("cpu", chapters=["first"]), titles={"first": "The first chapter"})
    assert "{doc}`The first chapter <first>`" in text
    assert "weight v1 \\|cos\\|" in text
    assert "0.90 ± 0.02 (n = 3 seeds)" in text and "0.30 (n = 3 seeds)" in text


def test_the_closing_chapter_is_last_in_the_book_and_not_a_claim_chapter():
    assert paths.chapters(ROOT)[-1] == paths.CLOSING  # the last notebook; only the users' appendix page follows it
    assert paths.toc_files(ROOT)[-2:] == ["book/claims", "book/using"]
    names = claims.claim_chapters(ROOT)
    assert "claims" not in names and names[0] == "mlp_conditions"


def test_closing_chapter_runs_last_and_again_when_a_claims_table_changes(tmp_path, monkeypatch):
    layout = paths.Layout(tmp_path)
    ran = []
    monkeypatch.setattr(build, "chapters", lambda root: [paths.CLOSING, Path("book/a.ipynb"), Path("book/b.ipynb")])
    monkeypatch.setattr(build, "execute", lambda root, notebook, parameters, layout=None: ran.append(notebook))
    monkeypatch.setattr(build, "check_parameters", lambda root, notebook, parameters: None)
    build.execute_stale(ROOT, "smoke", force=False, layout=layout)
    assert ran == [Path("book/a.ipynb"), Path("book/b.ipynb"), paths.CLOSING]
    before = build._claims_inputs_sha256(layout, ROOT)
    layout.claims.mkdir(parents=True)
    (layout.claims / "a.json").write_text(json.dumps({"chapter": "a"}))
    assert build._claims_inputs_sha256(layout, ROOT) != before


def test_every_generated_part_has_its_place_in_a_page(tmp_path):
    pages = tmp_path / "book"
    shutil.copytree(ROOT / "book", pages, ignore=shutil.ignore_patterns("*.ipynb"))
    parts = build.generated_markdown()
    build.fill_generated(pages, parts)
    text = (pages / "methods.md").read_text()
    assert all(part in text for part in parts.values()) and not any(marker in text for marker in parts)
    assert scales_markdown().splitlines()[0] in text


def test_a_generated_part_without_its_marker_stops_the_build(tmp_path):
    (tmp_path / "page.md").write_text("no marker here\n")
    with pytest.raises(SystemExit, match="no page .* holds the marker"):
        build.fill_generated(tmp_path, {"<!-- generated: x -->": "table"})


def test_the_scales_table_has_a_column_per_scale_and_a_row_per_setting():
    lines = scales_markdown().splitlines()
    assert lines[0] == "| setting | `smoke` | `cpu` | `paper` |"
    assert all(line.count(" | ") == 3 for line in lines[2:])


def test_show_figure_glues_a_numbered_figure_in_book_builds(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objects, **kw: shown.extend(objects))
    monkeypatch.setenv(paths.BOOK_ENV, "1")
    fig, _ = plt.subplots()
    show_figure(fig, "test-figure", "A caption with 0.93.")
    assert shown[-1].data == "```{glue:figure} test-figure\n:name: test-figure\n\nA caption with 0.93.\n```"
    assert not plt.fignum_exists(fig.number)
    with pytest.raises(ValueError, match="letters"):
        show_figure(plt.figure(), "bad name", "x")


def test_show_figure_outside_the_book_shows_the_caption(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objects, **kw: shown.extend(objects))
    monkeypatch.delenv(paths.BOOK_ENV, raising=False)
    show_figure(plt.figure(), "test-figure", "A caption.")
    assert shown[-1].data == "**test-figure.** A caption."


def test_markdown_table_shows_the_earlier_horizon_only_for_chapters_that_have_one(claims_dir):
    early = frame("long").assign(
        early_mean=[0.70, 0.10],
        early_sd=[0.01, math.nan],
        early_n=[3, 3],
        early_step=[930, 930],
        early_verdict=["not reproduced", "not reproduced"],
    )
    claims.publish(early, chapter="long", scale="cpu")
    claims.publish(frame("short"), chapter="short", scale="cpu")
    text = claims.markdown_table(claims.collect("cpu", chapters=["long", "short"]), titles={})
    long_block, short_block = text.split("\n\n**")
    assert "earlier in training" in long_block and "at 930 steps: 0.70 ± 0.01, n = 3 (not reproduced)" in long_block
    assert "at 930 steps: 0.10, n = 3 (not reproduced)" in long_block
    assert "earlier in training" not in short_block


def test_the_summary_counts_verdicts_per_chapter_with_a_total(claims_dir):
    claims.publish(frame("first", "partly reproduced"), chapter="first", scale="cpu")
    claims.publish(frame("second"), chapter="second", scale="cpu")
    text = claims.counts_markdown(
        claims.collect("cpu", chapters=["first", "second"]), titles={"first": "One: the first chapter"}
    )
    assert text.splitlines() == [
        "| chapter | claims | verdicts |",
        "|---|---:|---|",
        "| {doc}`One <first>` | 2 | **1** partly reproduced, **1** not reproduced |",
        "| {doc}`second <second>` | 2 | **1** reproduced, **1** not reproduced |",
        "| **all chapters** | **4** | **1** reproduced, **1** partly reproduced, **2** not reproduced |",
    ]


def test_the_headline_is_the_flagged_claims_whatever_their_keys():
    rows = pd.DataFrame(
        [
            claim_row(
                chapter="c2",
                claim="Linear gradients",
                quantity="Res+None gradient v1 |cos|",
                paper="0.93",
                ours_mean=0.91,
                ours_std=0.01,
                n_seeds=3,
                baseline=0.05,
                verdict="reproduced",
                key="linear-gradient-v1",
                headline=True,
            ),
            claim_row(
                chapter="c2",
                claim="Linear weights",
                quantity="Res+None weight v1 |cos|",
                paper="0.22",
                ours_mean=0.61,
                ours_std=0.02,
                n_seeds=3,
                baseline=0.05,
                verdict="not reproduced",
                key="renamed-key",
                headline=True,
            ),
            claim_row(
                chapter="c2",
                claim="Elsewhere",
                quantity="q (mnist-10k)",
                paper="0.22",
                ours_mean=0.2,
                ours_std=0.0,
                n_seeds=3,
                baseline=0.05,
                verdict="reproduced",
                key="linear-weight-v1-x",
            ),
            claim_row(
                chapter="other",
                claim="Same key elsewhere",
                quantity="q",
                paper="0.1",
                ours_mean=0.1,
                ours_std=0.0,
                n_seeds=3,
                baseline=0.05,
                verdict="not reproduced",
                key="linear-gradient-v1",
            ),
        ]
    )
    assert list(claims.headline_claims(rows)["key"]) == ["linear-gradient-v1", "renamed-key"]
    titles = {"c2": "What makes the linear net lose its continuity?"}
    text = claims.headline_summary(rows, titles)
    assert (
        "1 reproduced and 1 not reproduced" in text
        and "{doc}`What makes the linear net lose its continuity? <c2>`" in text
    )
    assert "Res+None weight v1 |cos| (not reproduced: ours 0.61, paper 0.22)" in text
    assert "gradient" not in text.split("Short of reproduced")[1]
    assert claims.headline_summary(rows.iloc[[0]], titles) != claims.headline_summary(rows.iloc[[0, 1]], titles)
    assert claims.headline_summary(rows.iloc[[2, 3]], titles) == claims._PROSE.render("headline-none")


def test_the_closing_chapter_rejects_an_unknown_parameter_and_collects_the_tables(tmp_path, monkeypatch):
    from geocont.scales import ParameterError

    monkeypatch.setenv("GEOCONT_CLAIMS_DIR", str(tmp_path))
    with pytest.raises(ParameterError, match="unknown parameter.*scael"):
        claims.from_notebook({"scale": "smoke", "scael": "cpu"})
    with pytest.raises(claims.MissingClaims, match="no published claims table"):
        claims.from_notebook({"scale": "smoke"})


def test_a_chapter_shows_the_early_value_formatted_in_one_column():
    from geocont.book.chapter import claims_display

    early = frame("long").assign(
        early_mean=[0.70, math.nan],
        early_sd=[0.01, math.nan],
        early_n=[3, 0],
        early_step=[930, None],
        early_verdict=["not reproduced", ""],
    )
    shown = claims_display(early).data
    assert list(shown["early"]) == ["at 930 steps: 0.70 ± 0.01, n = 3 (not reproduced)", ""]
    assert not {"early_mean", "early_step", "early_verdict", "chapter"} & set(shown.columns)


# ---------------------------------------------------------------------------------------------
# Every claim names its dataset; the closing page shows one verdict per claim
# ---------------------------------------------------------------------------------------------


def test_a_claim_key_is_its_name_and_its_dataset_and_splits_back():
    from geocont.tables import claim_key, split_claim_key

    assert claim_key("linear-weight-v1", "mnist-10k") == "linear-weight-v1@mnist-10k"
    assert split_claim_key("linear-weight-v1@mnist-10k") == ("linear-weight-v1", "mnist-10k")
    assert claim_key("a-claim", "") == "a-claim" and split_claim_key("a-claim") == ("a-claim", "")
    for name, dataset in (("a@b", "mnist"), ("a", "mn@ist"), ("a", "mnist subset"), ("A", "mnist")):
        with pytest.raises(ValueError):
            claim_key(name, dataset)
    with pytest.raises(ValueError, match="not a claim key"):
        split_claim_key("a@b@c")


#: The words of the claims the tests below build (geocont.book.prose's claim templates).
TEST_WORDS = """
## claim.res-none-falls
claim: The linear net's continuity falls
quantity: res-none peak minus final
paper: collapse
note: peak {peak}

## claim.relu-above-linear
claim: ReLU keeps it
quantity: res-relu minus res-none
paper: higher

## claim.only-elsewhere
claim: Judged on the subset only
quantity: q
paper: 0.5

## claim.a
claim: A
quantity: q
paper: 0.9

## claim.large-model
claim: It holds in
  {model}
quantity: v1 |cos|
paper: holds
note: never shown for a claim not tested ({missing})

## not-tested.unavailable
checkpoint of {model} not available here
"""


def builder_of(chapter: str, dataset: str = ""):
    from geocont.book.chapter import ClaimsBuilder
    from geocont.book.prose import Prose, parse

    return ClaimsBuilder(chapter, dataset=dataset, prose=Prose("test.md", parse(TEST_WORDS)))


def condition2_claims():
    """One chapter's claims as Condition 2 builds them: each on fashion-mnist (the headline dataset),
    mnist-10k and the 4k MNIST subset."""
    from geocont.statistics import Estimate

    builder = builder_of("c2", dataset="fashion-mnist")
    verdicts = {"fashion-mnist": "reproduced", "mnist-10k": "not reproduced", "mnist-subset": "partly reproduced"}
    for i, (dataset, verdict) in enumerate(verdicts.items()):
        builder.add(
            key="res-none-falls",
            ours=Estimate(0.4 - 0.1 * i, 0.02, 3),
            baseline=0.05,
            verdict=verdict,
            fill={"peak": 0.8 - 0.1 * i},
            headline=True,
            dataset=None if dataset == "fashion-mnist" else dataset,
        )
        builder.add(
            key="relu-above-linear", ours=Estimate(0.3, 0.02, 3), baseline=0.05, verdict="reproduced", dataset=dataset
        )
    builder.add(
        key="only-elsewhere", ours=Estimate(0.5, 0.01, 3), baseline=0.05, verdict="reproduced", dataset="mnist-subset"
    )
    return builder.table()


def test_the_builder_keys_each_row_by_claim_and_dataset_and_marks_the_headline_datasets_rows_primary():
    from geocont.book.chapter import claim
    from geocont.statistics import Estimate

    table = condition2_claims()
    assert list(table.columns) == CLAIM_COLUMNS and table["key"].is_unique
    assert list(table["key"][:2]) == ["res-none-falls@fashion-mnist", "relu-above-linear@fashion-mnist"]
    assert list(table.loc[table["primary"], "dataset"].unique()) == ["fashion-mnist"]
    assert claim(table, "res-none-falls")["verdict"] == "reproduced"  # a name alone: the primary row
    assert claim(table, "res-none-falls", dataset="mnist-10k")["verdict"] == "not reproduced"
    assert claim(table, "res-none-falls@mnist-subset")["verdict"] == "partly reproduced"
    assert claim(table, "res-none-falls@mnist-subset", dataset="mnist-subset")["verdict"] == "partly reproduced"
    with pytest.raises(ValueError, match="names dataset"):
        claim(table, "res-none-falls@mnist-subset", dataset="mnist-10k")
    with pytest.raises(KeyError, match="no claim 'only-elsewhere'"):
        claim(table, "only-elsewhere")  # it has no verdict of record
    with pytest.raises(KeyError, match="no claim 'nope' on 'mnist'"):
        claim(table, "nope", dataset="mnist")
    from geocont.book.chapter import has_claim

    assert has_claim(table, "res-none-falls") and has_claim(table, "res-none-falls", dataset="mnist-10k")
    assert not has_claim(table, "only-elsewhere") and has_claim(table, "only-elsewhere", dataset="mnist-subset")
    builder = builder_of("c2", dataset="kjv")
    builder.add(key="a", ours=Estimate(0.9, 0.0, 3), baseline=0.05, verdict="reproduced")
    builder.add(key="a", ours=Estimate(0.9, 0.0, 3), baseline=0.05, verdict="reproduced", dataset="wikitext-103")
    with pytest.raises(ValueError, match="'a@kjv' is used twice"):
        builder.add(key="a", ours=Estimate(0.9, 0.0, 3), baseline=0.05, verdict="reproduced")
    with pytest.raises(ValueError, match="without '@'"):
        builder_of("c2", dataset="k@jv")
    plain = builder_of("c2")  # a chapter that names no dataset: plain keys, every row primary
    plain.add(key="a", ours=Estimate(0.9, 0.0, 3), baseline=0.05, verdict="reproduced")
    assert plain.table()[["key", "dataset", "primary"]].values.tolist() == [["a", "", True]]


def test_a_claims_words_come_from_its_template_filled_with_the_values():
    from geocont.book.prose import ProseError
    from geocont.statistics import Estimate

    table = condition2_claims()
    row = table.iloc[0]
    assert (row["claim"], row["quantity"], row["paper"], row["note"]) == (
        "The linear net's continuity falls",
        "res-none peak minus final",
        "collapse",
        "peak 0.8",
    )
    assert table.iloc[1]["note"] == ""  # a template without a note part
    builder = builder_of("c2")
    builder.add(
        key="one",
        template="large-model",
        ours=0.5,
        baseline=0.05,
        verdict="reproduced",
        fill={"model": "Llama", "missing": 1},
        std=0.1,
        n=3,
    )
    assert builder.table().iloc[0][["key", "claim", "n_seeds"]].tolist() == ["one", "It holds in Llama", 3]
    with pytest.raises(ProseError, match="no claim 'nope'; claims: res-none-falls, relu-above-linear"):
        builder.add(key="nope", ours=Estimate(0.9, 0.0, 3), baseline=0.05, verdict="reproduced")
    with pytest.raises(ProseError, match="needs missing"):
        builder.add(
            key="two", template="large-model", ours=0.5, baseline=0.05, verdict="reproduced", fill={"model": "Gemma"}
        )


@pytest.mark.parametrize(
    "text, message",
    [
        ("## claim.x\nclaim: A\nquantity: q", "needs paper"),
        ("## claim.x\nA claim\nquantity: q\npaper: p", "starts with one of claim"),
        ("## claim.x\nclaim: A\nclaim: B\nquantity: q\npaper: p", "'claim' is given twice"),
    ],
)
def test_a_claim_template_without_its_parts_is_refused_when_its_file_is_read(text, message):
    from geocont.book.prose import ProseError, parse

    with pytest.raises(ProseError, match=message):
        parse(text, "f.md")


def test_a_claim_not_tested_has_no_value_of_ours_and_says_why():
    builder = builder_of("c2", dataset="kjv")
    builder.not_tested(key="large-llama", template="large-model", reason="unavailable", fill={"model": "Llama"})
    builder.not_tested(
        key="large-llama",
        template="large-model",
        reason="unavailable",
        fill={"model": "Llama"},
        baseline=0.05,
        dataset="wikitext-103",
        headline=True,
    )
    here, elsewhere = builder.table().to_dict(orient="records")
    assert here["key"] == "large-llama@kjv" and here["verdict"] == "not tested" and here["n_seeds"] == 0
    assert math.isnan(here["ours_mean"]) and math.isnan(here["ours_std"]) and math.isnan(here["baseline"])
    assert (here["claim"], here["note"]) == ("It holds in Llama", "checkpoint of Llama not available here")
    assert (here["primary"], here["headline"]) == (True, False)
    assert (elsewhere["key"], elsewhere["baseline"], elsewhere["primary"], elsewhere["headline"]) == (
        "large-llama@wikitext-103",
        0.05,
        False,
        True,
    )
    with pytest.raises(TypeError):
        builder.not_tested("large-gemma", "unavailable")  # keywords only


def test_the_early_values_match_on_the_full_keys():
    from geocont.book.chapter import with_early

    late = condition2_claims()
    early = late.assign(ours_mean=late["ours_mean"] + 0.1, verdict="not reproduced")
    both = with_early(late, early, 930)
    assert both["early_mean"].tolist() == pytest.approx((late["ours_mean"] + 0.1).tolist())
    with pytest.raises(KeyError, match="res-none-falls@mnist-10k"):
        with_early(late, early[early["key"] != "res-none-falls@mnist-10k"], 930)


def table_rows(block: str) -> list[dict[str, str]]:
    """The rows of the first Markdown table in ``block``, each as ``{column header: cell}``."""
    lines = [line for line in block.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split(" | ")]
    return [dict(zip(header, (cell.strip() for cell in line.strip("|").split(" | ")))) for line in lines[2:]]


def cell_values(cell: str) -> tuple[str, list[float]]:
    """A cell's verdict (its bold words, "" if none) and its numbers, in order."""
    verdict = re.search(r"\*\*(.+?)\*\*", cell)
    return (verdict.group(1) if verdict else "", [float(x) for x in re.findall(r"\d+(?:\.\d+)?", cell)])


def test_the_closing_page_shows_one_verdict_per_claim_and_the_other_datasets_beside_it(claims_dir):
    claims.publish(condition2_claims(), chapter="c2", scale="cpu")
    claims.publish(frame("plain"), chapter="plain", scale="cpu")  # a chapter that names no dataset
    table = claims.collect("cpu", chapters=["c2", "plain"])
    text = claims.markdown_table(table, titles={})
    c2, plain = text.split("\n\n**")
    assert "verdicts on `fashion-mnist`" in c2.splitlines()[0]
    rows = table_rows(c2)
    assert [row["claim"] for row in rows] == [
        "The linear net's continuity falls",
        "ReLU keeps it",
        "Judged on the subset only",
    ]  # each claim once
    falls, _, elsewhere = rows
    assert cell_values(falls["ours (mean ± sd, n)"]) == ("", [0.40, 0.02, 3])
    assert cell_values(falls["verdict"]) == ("reproduced", [])
    assert cell_values(falls["on `mnist-10k`"]) == ("not reproduced", [0.30, 0.02, 3])
    assert cell_values(falls["on `mnist-subset`"]) == ("partly reproduced", [0.20, 0.02, 3])
    assert [cell_values(elsewhere[column]) for column in ("verdict", "on `mnist-10k`", "on `mnist-subset`")] == [
        ("", []),
        ("", []),
        ("reproduced", [0.50, 0.01, 3]),
    ]  # no verdict of record, not judged on mnist-10k
    assert "on `" not in plain and "verdicts on" not in plain
    # at a glance: each claim once, by its verdict of record (not every dataset's row of c2)
    counts = claims.verdict_counts(table)
    assert counts.loc["c2"][counts.loc["c2"] > 0].to_dict() == {"reproduced": 2} and counts.loc["plain"].sum() == 2
    assert [row["claims"] for row in table_rows(claims.counts_markdown(table, titles={}))][0] == "2"
    assert list(claims.headline_claims(table)["key"]) == ["res-none-falls@fashion-mnist"]
    page = claims.ClaimsPage("cpu", table, {})
    intro = claims.tables(page).data.split("\n\n")[0]
    assert intro.startswith("4 claims from 2 chapters")
    assert "(`mnist-10k` and `mnist-subset`: 5 verdicts)" in intro
    assert "peak 0.7 " not in claims.details(page).data
    assert (
        "- The linear net's continuity falls (res-none peak minus final, `mnist-10k`): peak 0.7"
        in claims.details(page).data
    )


def test_a_table_published_before_the_dataset_columns_loads_with_every_row_primary(claims_dir):
    claims_dir.mkdir(parents=True)
    old = frame("first").drop(columns=["dataset", "primary"])
    records = [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        for r in old.to_dict(orient="records")
    ]
    (claims_dir / "first.json").write_text(
        json.dumps({"chapter": "first", "scale": "cpu", "overrides": {}, "claims": records})
    )
    table = claims.collect("cpu", chapters=["first"])
    assert list(table["dataset"]) == ["", ""] and list(table["primary"]) == [True, True]
    assert claims.verdict_counts(table).loc["first"].sum() == 2


def test_publish_rejects_a_claim_with_two_verdicts_of_record_or_a_key_that_names_another_dataset(claims_dir):
    twice = condition2_claims()
    twice.loc[twice["key"] == "res-none-falls@mnist-10k", "primary"] = True
    with pytest.raises(ValueError, match="res-none-falls.*twice"):
        claims.publish(twice, chapter="c2", scale="cpu")
    wrong = condition2_claims()
    wrong.loc[0, "dataset"] = "mnist"
    with pytest.raises(ValueError, match="do not name their row's dataset"):
        claims.publish(wrong, chapter="c2", scale="cpu")


def test_a_chapter_shows_the_dataset_column_only_where_a_claim_names_one():
    from geocont.book.chapter import claims_display

    assert "dataset" not in claims_display(frame("plain")).data.columns
    shown = claims_display(condition2_claims()).data
    assert "dataset" in shown.columns and "primary" not in shown.columns


def test_a_claim_is_added_by_name_only():
    from geocont.statistics import Estimate

    with pytest.raises(TypeError):
        builder_of("timeline").add("a", Estimate(0.9, 0.0, 3), 0.05, "reproduced")
