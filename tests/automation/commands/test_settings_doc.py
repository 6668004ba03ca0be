"""``settings-doc write|check``: docs/settings.md and README's settings table come from the settings
models, and a stale copy is refused the way ``pack-config check`` refuses a stale pack config."""

from __future__ import annotations

import re
import shutil

from automation import exit_codes
from automation.cli import main
from automation.offline.plan import ROOT
from automation.settings_reference import anchor, reference
from components.settings import Settings

STALE_REFERENCE = ("docs/settings.md: differs from the settings models; run "
                   "`python -m automation settings-doc write`")
STALE_README = "README.md: differs from the settings models; run `python -m automation settings-doc write`"


def _copy(tmp_path):
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copy(ROOT / "docs" / "settings.md", tmp_path / "docs" / "settings.md")
    return tmp_path


def _rows(text: str, key: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"| {key} |")]


def test_the_committed_reference_and_readme_are_up_to_date(capsys):
    assert main(["settings-doc", "check"]) == exit_codes.OK
    assert capsys.readouterr().out.splitlines() == ["docs/settings.md: up to date", "README.md: up to date"]


def test_check_names_a_stale_reference_and_changes_nothing(tmp_path, capsys):
    root = _copy(tmp_path)
    page = root / "docs" / "settings.md"
    stale = page.read_text().replace("Availability Zones the subnets and node groups span.",
                                     "Zones of the VPC.")
    page.write_text(stale)
    assert main(["settings-doc", "check", "--root", str(root)]) == exit_codes.FAILED
    assert capsys.readouterr().out.splitlines() == [STALE_REFERENCE, "README.md: up to date"]
    assert page.read_text() == stale


def test_check_names_a_hand_edited_readme_table(tmp_path, capsys):
    root = _copy(tmp_path)
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("| [`tags`](docs/settings.md#top-level-keys) | `{}` |",
                                                 "| [`tags`](docs/settings.md#top-level-keys) | none |"))
    assert main(["settings-doc", "check", "--root", str(root)]) == exit_codes.FAILED
    assert capsys.readouterr().out.splitlines() == ["docs/settings.md: up to date", STALE_README]


def test_write_replaces_only_the_table_between_the_markers(tmp_path, capsys):
    root = _copy(tmp_path)
    readme = root / "README.md"
    original = readme.read_text()
    begin, end = original.index("<!-- settings-table:begin -->"), original.index("<!-- settings-table:end -->")
    readme.write_text(original[:begin] + "<!-- settings-table:begin -->\n| old |\n" + original[end:])
    (root / "docs" / "settings.md").unlink()
    assert main(["settings-doc", "write", "--root", str(root)]) == exit_codes.OK
    assert capsys.readouterr().out.splitlines() == ["docs/settings.md: written", "README.md: written"]
    assert readme.read_text() == original
    assert (root / "docs" / "settings.md").read_text() == (ROOT / "docs" / "settings.md").read_text()
    assert main(["settings-doc", "check", "--root", str(root)]) == exit_codes.OK


def test_a_readme_without_markers_is_one_line_and_nothing_is_written(tmp_path, capsys):
    (tmp_path / "README.md").write_text("# a project\n\n| key | default |\n")
    assert main(["settings-doc", "write", "--root", str(tmp_path)]) == exit_codes.USAGE
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "error: README.md: no settings-table markers; put <!-- settings-table:begin --> and "
        "<!-- settings-table:end --> on their own lines where the settings table goes"]
    assert not (tmp_path / "docs").exists()
    assert (tmp_path / "README.md").read_text() == "# a project\n\n| key | default |\n"


def test_a_root_without_a_readme_is_a_usage_error(tmp_path, capsys):
    assert main(["settings-doc", "check", "--root", str(tmp_path / "nowhere")]) == exit_codes.USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "holds no README.md" in err and "Traceback" not in err


def test_rows_carry_type_default_bounds_and_choices_from_the_fields():
    text = reference()
    assert _rows(text, "`network.azCount`") == [
        "| `network.azCount` | integer | `3` | 2 to 6 | Availability Zones the subnets and node groups span. "
        "Unit: zones. |"]
    assert _rows(text, "`network.natGateways`")[0].startswith(
        "| `network.natGateways` | string | `single` | `single`, `perAz` | ")
    # an open bound (gt=0) beside a closed one
    assert _rows(text, "`serving.tiers[].scaling.kvCacheUsage`")[0].startswith(
        "| `serving.tiers[].scaling.kvCacheUsage` | number | `0.8` | above 0, at most 1 | ")
    # a list of Literals with a minimum length and a factory default
    assert _rows(text, "`observability.alerting.routes[].severities`")[0].startswith(
        "| `observability.alerting.routes[].severities` | list of string | `[\"critical\", \"warning\"]` | "
        "at least 1 item; each one of `critical`, `warning`, `info` | ")
    # a list of models whose default holds one: only what differs from the item's own defaults
    assert _rows(text, "`karpenter.nodePools[].budgets`")[0].startswith(
        "| `karpenter.nodePools[].budgets` | list of [DisruptionBudget](#karpenternodepoolsbudgets) | "
        "`[{\"nodes\": \"10%\"}]` | at least 1 item | ")
    # a secret, required, in a model reached through an optional member of a list item
    assert _rows(text, "`observability.alerting.receivers[].slack.apiUrl`")[0].startswith(
        "| `observability.alerting.receivers[].slack.apiUrl` | secret string | required |  | ")
    # a default computed from another key is unset in the field and said in user terms in the description
    row = _rows(text, "`deletionProtection`")[0]
    assert row.startswith("| `deletionProtection` | boolean | unset |  | ")
    assert "default true when production is true, false otherwise" in row


def test_a_model_used_at_two_places_has_one_table_that_names_both():
    text = reference()
    section = text[text.index("\n## karpenter.nodePools[]\n"):]
    section = section[:section.index("\n## ", 1)]
    assert "Also at: `autoMode.gpuNodePools[]`." in section
    assert "\n## autoMode.gpuNodePools[]\n" not in text


def test_anchors_follow_githubs_rule():
    assert anchor("Top-level keys") == "top-level-keys"
    assert anchor("karpenter.nodePools[]") == "karpenternodepools"
    assert anchor("observability.alerting.receivers[].pagerDuty") == "observabilityalertingreceiverspagerduty"


def test_the_readme_table_has_one_row_per_top_level_key_linking_to_its_table():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("<!-- settings-table:begin -->"):readme.index("<!-- settings-table:end -->")]
    links = re.findall(r"^\| \[`([^`]+)`\]\(docs/settings\.md#([^)]+)\) \|", table, re.MULTILINE)
    assert [key for key, _ in links] == [info.alias for info in Settings.model_fields.values()]
    assert dict(links)["network"] == "network" and dict(links)["region"] == "top-level-keys"
    assert dict(links)["gpuPools"] == "gpupools"
    headings = {anchor(h) for h in re.findall(r"^## (.+)$", (ROOT / "docs" / "settings.md").read_text(), re.MULTILINE)}
    assert {target for _, target in links} <= headings
