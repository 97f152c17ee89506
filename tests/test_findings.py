"""The README's findings table is the committed claims snapshot's (geocont.book.findings)."""

import json
import shutil

import pytest

from geocont.book import findings
from geocont.book.paths import repository_root


def test_the_readme_findings_table_is_generated_from_the_committed_snapshot():
    root = repository_root()
    readme = (root / "README.md").read_text()
    assert findings.readme_block(readme) == findings.findings_markdown(findings.snapshot_dir(root)), (
        "README.md's findings table is stale: python -m geocont.book.findings --write"
    )


def test_the_table_reads_each_main_claim_s_verdict_of_record(tmp_path):
    snapshot = tmp_path / "snapshot"
    shutil.copytree(findings.snapshot_dir(repository_root()), snapshot)
    path = snapshot / "mlp_conditions.json"
    payload = json.loads(path.read_text())
    row = next(row for row in payload["claims"] if row["key"] == "linear-weight-v1@fashion-mnist")
    row.update(ours_mean=0.5, ours_std=0.25, n_seeds=3, verdict="not reproduced")
    path.write_text(json.dumps(payload))
    table = findings.main_claims(snapshot)
    assert len(table) == len(findings.MAIN_CLAIMS)
    changed = table[table["key"] == "linear-weight-v1@fashion-mnist"].iloc[0]
    assert (changed.ours_mean, changed.ours_std, changed.verdict) == (0.5, 0.25, "not reproduced")
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{findings.START}\nold\n{findings.END}\nrest\n")
    assert findings.write(readme, snapshot) and not findings.write(readme, snapshot)
    assert readme.read_text().startswith("intro\n") and readme.read_text().endswith("\nrest\n")
    assert "| 0.50 ± 0.25 (n = 3 seeds) |" in findings.readme_block(readme.read_text())


def test_a_main_claim_missing_from_the_snapshot_is_named(tmp_path):
    snapshot = tmp_path / "snapshot"
    shutil.copytree(findings.snapshot_dir(repository_root()), snapshot)
    path = snapshot / "condition2.json"
    payload = json.loads(path.read_text())
    payload["claims"] = [row for row in payload["claims"] if not row["key"].startswith("rotation-drift")]
    path.write_text(json.dumps(payload))
    with pytest.raises(KeyError, match="rotation-drift"):
        findings.main_claims(snapshot)


def test_every_failure_of_the_findings_command_is_one_line(tmp_path, monkeypatch, capsys):
    for name in ("_toc.yml", "_config.yml"):
        (tmp_path / name).write_text("")
    snapshot = findings.snapshot_dir(tmp_path)
    shutil.copytree(findings.snapshot_dir(repository_root()), snapshot)
    (tmp_path / "README.md").write_text("no markers here\n")
    monkeypatch.chdir(tmp_path)

    def error_of() -> str:
        assert findings.main(["--write"]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err.startswith("error: ")
        return err

    assert "README.md has no findings markers" in error_of()
    (snapshot / "condition2.json").write_text("{")
    assert "claims snapshot" in error_of() and "condition2.json" in error_of()
    (snapshot / "condition2.json").unlink()
    assert "condition2.json is missing or unreadable" in error_of()
    monkeypatch.chdir(tmp_path.parent)
    assert "run from inside the geocont repository" in error_of()
