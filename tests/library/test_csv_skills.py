"""CSV clean-up: normalise, deduplicate, validate, bundle."""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path

import pytest

from tests.library.conftest import call_skill, run_skill


def read(path: str) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def normalized(samples: Path, folder: Path) -> dict[str, object]:
    return run_skill("csv-normalize", path=str(samples / "customers_messy.csv"),
                     output_dir=str(folder))


def test_csv_normalize_cleans_every_kind_of_column(samples: Path, tmp_path: Path) -> None:
    result = normalized(samples, tmp_path)
    assert result["columns"] == ["customer_name", "email", "phone_number", "signup_date",
                                 "total_spent", "country"]
    assert result["header_changes"][" E-mail"] == "email"
    rows = read(str(result["path"]))
    assert len(rows) == result["rows"] == 10
    alice, bob = rows[0], rows[1]
    assert alice == {"customer_name": "Alice Moreau", "email": "alice.moreau@example.com",
                     "phone_number": "+33612345678", "signup_date": "2024-01-15",
                     "total_spent": "1250.00", "country": "France"}
    assert (bob["customer_name"], bob["phone_number"], bob["signup_date"], bob["country"]) == (
        "Bob Stein", "5550102233", "2024-02-03", "USA")
    assert rows[3]["signup_date"] == "2024-01-15"  # "15 Jan 2024"
    assert rows[4]["customer_name"] == "Dana Whitfield" and rows[4]["total_spent"] == ""
    assert rows[8]["signup_date"] == "not a date"
    assert result["unparsed_dates"] == 1
    assert result["changed_cells"] == sum(result["changes_by_column"].values()) > 20
    assert (samples / "customers_messy.csv").read_text(encoding="utf-8").startswith(
        "Customer Name ,"), "the input file is untouched"


def test_csv_normalize_day_first(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("Order Date\n02/03/2024\n", encoding="utf-8")
    result = run_skill("csv-normalize", path=str(path), day_first=True, output_dir=str(tmp_path))
    assert read(result["path"])[0]["order_date"] == "2024-03-02"


def test_csv_deduplicate_by_email_after_normalising(samples: Path, tmp_path: Path) -> None:
    clean = normalized(samples, tmp_path)
    result = run_skill("csv-deduplicate", path=str(clean["path"]), key_columns=["email"],
                       output_dir=str(tmp_path))
    assert (result["rows_in"], result["rows_out"], result["duplicates_removed"]) == (10, 8, 2)
    assert result["duplicate_keys"] == ["alice.moreau@example.com", "bob.stein@example.com"]
    emails = [r["email"] for r in read(result["path"])]
    assert len(emails) == len(set(emails))


def test_csv_deduplicate_whole_rows_keep_last(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("a,b\nx,1\nX ,1\ny,2\n,\n", encoding="utf-8")
    result = run_skill("csv-deduplicate", path=str(path), keep="last", output_dir=str(tmp_path))
    assert read(result["path"]) == [{"a": "X ", "b": "1"}, {"a": "y", "b": "2"}]


def test_csv_validate_inferred_rules_split_the_file(samples: Path, tmp_path: Path) -> None:
    clean = normalized(samples, tmp_path)
    deduped = run_skill("csv-deduplicate", path=str(clean["path"]), key_columns=["email"],
                        output_dir=str(tmp_path))
    result = run_skill("csv-validate", path=deduped["path"], output_dir=str(tmp_path))
    assert (result["ok"], result["valid_rows"], result["rejected_rows"]) == (False, 5, 3)
    assert [(e["column"], e["message"]) for e in result["errors"]] == [
        ("email", "'dana.whitfield@larkspur' is not a valid email address"),
        ("customer_name", "is required"),
        ("signup_date", "'not a date' is not a YYYY-MM-DD date"),
    ]
    rejected = read(result["rejected_path"])
    assert rejected[0]["errors"].startswith("email: ")
    assert result["rules_used"]["email"] == {"type": "email", "required": True}


def test_csv_validate_explicit_rules(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("sku,qty,status\nA-1,3,open\nB2,0,gone\n", encoding="utf-8")
    result = run_skill("csv-validate", path=str(path), output_dir=str(tmp_path), rules={
        "sku": {"pattern": "[A-Z]-\\d+", "required": True},
        "qty": {"type": "integer", "min": 1},
        "status": {"allowed": ["open", "closed"]},
    })
    assert result["valid_rows"] == 1
    assert [e["message"] for e in result["errors"]] == [
        "'B2' does not match [A-Z]-\\d+", "0 is below the minimum 1",
        "'gone' is not one of open, closed"]


def test_csv_validate_rule_for_a_missing_column(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("a\n1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^rules\.email: the file has no such column"):
        call_skill("csv-validate", path=str(path), rules={"email": {"type": "email"}},
                   output_dir=str(tmp_path))


def test_zip_files_bundles_with_unique_names(samples: Path, tmp_path: Path) -> None:
    other = tmp_path / "x"
    other.mkdir()
    (other / "kpi_daily.csv").write_text("date\n", encoding="utf-8")
    result = run_skill("zip-files", files=[str(samples / "kpi_daily.csv"),
                                           str(other / "kpi_daily.csv"), ""],
                       archive_name="out.zip", output_dir=str(tmp_path))
    assert result["names"] == ["kpi_daily.csv", "kpi_daily-2.csv"]
    with zipfile.ZipFile(result["path"]) as archive:
        assert archive.namelist() == result["names"]
        assert archive.read("kpi_daily.csv") == (samples / "kpi_daily.csv").read_bytes()
    assert result["bytes"] == Path(result["path"]).stat().st_size
