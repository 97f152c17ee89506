"""The first page's reproducibility summary (geocont.book.summary), computed from published claims tables."""

import json
import shutil

from geocont.book import summary
from geocont.book.claims import claim_chapters
from geocont.book.findings import snapshot_dir
from geocont.book.paths import repository_root


def _claims(tmp_path):
    claims = tmp_path / "claims"
    shutil.copytree(snapshot_dir(repository_root()), claims)
    return claims


def test_the_summary_counts_every_primary_verdict_and_draws_the_headline_figure(tmp_path):
    claims = _claims(tmp_path)
    rows = [row for path in claims.glob("*.json") for row in json.loads(path.read_text())["claims"] if row["primary"]]
    text = summary.reproducibility_summary(claims, tmp_path / "pages", claim_chapters())
    assert (tmp_path / "pages" / summary.FIGURE).stat().st_size > 10_000
    counted = summary.verdict_counts(summary.published_claims(claims, claim_chapters())[0].query("primary"))
    assert sum(counted.values()) == len(rows)
    assert f"Of the {len(rows)} claims, " in text
    assert all(f"**{n}** {verdict}" in text for verdict, n in counted.items())


def test_the_main_claims_split_into_what_held_and_what_did_not(tmp_path):
    claims = _claims(tmp_path)
    path = claims / "condition2.json"
    payload = json.loads(path.read_text())
    for row in payload["claims"]:
        if row["key"] == "rotation-drift@fashion-mnist":
            row["verdict"] = "not reproduced"
    path.write_text(json.dumps(payload))
    rows = summary.published_claims(claims, claim_chapters())[0].query("primary")
    main = summary.main_claim_rows(rows)
    assert (
        len(main) == 15
        and main.loc[main["key"] == "rotation-drift@fashion-mnist", "verdict"].item() == "not reproduced"
    )
    held, short = summary.easy_and_difficult(rows).split("**What was difficult.**")
    assert (
        "The linear net loses its continuity by rotation drift" not in held
        and "The linear net loses its continuity by rotation drift (*not reproduced*" in short
    )


def test_a_chapter_without_a_published_table_is_named_and_not_counted(tmp_path):
    claims = _claims(tmp_path)
    (claims / "timeline.json").unlink()
    text = summary.reproducibility_summary(claims, tmp_path / "pages", claim_chapters())
    assert "not counted above: `timeline`" in text
    assert summary.reproducibility_summary(tmp_path / "empty", tmp_path / "pages", claim_chapters()).startswith(
        "No chapter"
    )
