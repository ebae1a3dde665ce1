"""Weekly KPI report: statistics, period comparison, thresholds, chart, report, HTML, PDF."""

from __future__ import annotations

import csv
import re
import statistics
import struct
import zlib
from pathlib import Path

import pytest
from pypdf import PdfReader

from tests.library.conftest import call_skill, run_skill


def kpi_rows(samples: Path) -> list[dict[str, str]]:
    with (samples / "kpi_daily.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def decode_png(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and RGB pixels of a PNG written with filter 0 on every row."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat, width, height = 8, b"", 0, 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        tag = data[position + 4:position + 8]
        body = data[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length:position + 12 + length])
        assert crc == zlib.crc32(tag + body) & 0xFFFFFFFF, f"bad CRC in {tag!r}"
        if tag == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) == (8, 2), "8-bit RGB"
        elif tag == b"IDAT":
            idat += body
        position += 12 + length
    raw = zlib.decompress(idat)
    stride = width * 3 + 1
    assert len(raw) == stride * height
    assert all(raw[row * stride] == 0 for row in range(height))
    pixels = b"".join(raw[row * stride + 1:(row + 1) * stride] for row in range(height))
    return width, height, pixels


def test_csv_statistics_match_a_hand_computation(samples: Path) -> None:
    rows = kpi_rows(samples)
    result = run_skill("csv-statistics", path=str(samples / "kpi_daily.csv"))
    revenue = [float(r["revenue"]) for r in rows]
    stats = result["stats"]["revenue"]
    assert result["row_count"] == 30
    assert result["numeric_columns"] == ["visitors", "signups", "orders", "revenue", "refunds"]
    assert stats["sum"] == pytest.approx(sum(revenue))
    assert stats["mean"] == pytest.approx(statistics.fmean(revenue))
    assert stats["median"] == pytest.approx(statistics.median(revenue))
    assert (stats["min"], stats["max"]) == (min(revenue), max(revenue))
    assert (result["start_date"], result["end_date"]) == ("2024-09-02", "2024-10-01")
    assert result["table"][0]["column"] == "visitors"


def test_csv_statistics_reads_currency_and_missing_values(tmp_path: Path) -> None:
    path = tmp_path / "sales.csv"
    path.write_text('region;amount\nnorth;"$1,250.00"\nsouth;N/A\neast;(50.00)\n', encoding="utf-8")
    result = run_skill("csv-statistics", path=str(path))
    assert result["stats"]["amount"]["sum"] == 1200.0
    assert result["stats"]["amount"]["missing"] == 1


def test_compare_periods_last_week_against_the_week_before(samples: Path) -> None:
    rows = kpi_rows(samples)
    result = run_skill("compare-periods", path=str(samples / "kpi_daily.csv"))
    assert (result["current_start"], result["current_end"]) == ("2024-09-25", "2024-10-01")
    assert (result["previous_start"], result["previous_end"]) == ("2024-09-18", "2024-09-24")
    current = sum(int(r["signups"]) for r in rows if "2024-09-25" <= r["date"] <= "2024-10-01")
    previous = sum(int(r["signups"]) for r in rows if "2024-09-18" <= r["date"] <= "2024-09-24")
    signups = next(c for c in result["changes"] if c["metric"] == "signups")
    assert (signups["current"], signups["previous"]) == (current, previous)
    assert signups["change_pct"] == round((current - previous) / previous * 100, 1)
    assert signups["direction"] == "down"
    assert "signups down 13.7%" in result["headline"].lower()


def test_compare_periods_mean_of_a_chosen_column(samples: Path) -> None:
    result = run_skill("compare-periods", path=str(samples / "kpi_daily.csv"),
                       columns=["revenue"], aggregate="mean", end_date="2024-09-30")
    assert [c["metric"] for c in result["changes"]] == ["revenue"]
    assert result["current_end"] == "2024-09-30"


def test_check_kpi_thresholds_reports_each_breach(samples: Path) -> None:
    changes = run_skill("compare-periods", path=str(samples / "kpi_daily.csv"))["changes"]
    result = run_skill("check-kpi-thresholds", changes=changes, rules=[
        {"metric": "signups", "min_change_pct": -10},
        {"metric": "refunds", "max": 12},
        {"metric": "revenue", "min": 25000, "min_change_pct": -5},
    ])
    assert [(a["metric"], a["rule"]) for a in result["alerts"]] == [
        ("signups", "min_change_pct"), ("refunds", "max")]
    assert result["has_alerts"] is True and result["alert_count"] == 2
    assert result["summary"].splitlines() == [
        "signups changed by -13.7%, below the limit of -10%",
        "refunds is 16, above the maximum of 12",
    ]


def test_check_kpi_thresholds_rejects_a_rule_for_an_unknown_metric() -> None:
    with pytest.raises(ValueError, match=r"^rules\[0\]\.metric: 'signup' is not among"):
        call_skill("check-kpi-thresholds", changes=[{"metric": "signups", "current": 1}],
                   rules=[{"metric": "signup", "min": 0}])


def test_render_chart_writes_a_valid_png_of_the_requested_size(samples: Path,
                                                               tmp_path: Path) -> None:
    result = run_skill("render-chart", csv_path=str(samples / "kpi_daily.csv"), x_column="date",
                       y_columns=["revenue", "orders"], title="Daily revenue", width=640,
                       height=320, output_dir=str(tmp_path))
    assert Path(result["path"]) == tmp_path / "chart.png"
    assert (result["points"], result["series"]) == (30, ["revenue", "orders"])
    width, height, pixels = decode_png(Path(result["path"]).read_bytes())
    assert (width, height) == (640, 320)
    colors = {pixels[i:i + 3] for i in range(0, len(pixels), 3)}
    assert bytes((31, 119, 180)) in colors and bytes((255, 127, 14)) in colors  # both series
    assert bytes((40, 40, 40)) in colors  # axes and text


def test_render_chart_bar_chart_from_rows(tmp_path: Path) -> None:
    rows = [{"project": "Portal", "hours": 9.5}, {"project": "Data", "hours": 12.5}]
    result = run_skill("render-chart", rows=rows, x_column="project", y_columns=["hours"],
                       kind="bar", output_dir=str(tmp_path), filename="hours.png")
    assert decode_png(Path(result["path"]).read_bytes())[:2] == (800, 400)


def build_report(samples: Path, folder: Path) -> dict[str, str]:
    csv_path = str(samples / "kpi_daily.csv")
    stats = run_skill("csv-statistics", path=csv_path)
    compare = run_skill("compare-periods", path=csv_path)
    alerts = run_skill("check-kpi-thresholds", changes=compare["changes"],
                       rules=[{"metric": "signups", "min_change_pct": -10}])
    chart = run_skill("render-chart", csv_path=csv_path, x_column="date", y_columns=["revenue"],
                      output_dir=str(folder / "charts"))
    return run_skill("build-kpi-report", headline=compare["headline"], period="last week",
                     changes=compare["changes"], stats_table=stats["table"],
                     alerts=alerts["alerts"], chart_path=chart["path"],
                     output_dir=str(folder / "report"))


def test_build_kpi_report_writes_markdown_next_to_its_chart(samples: Path,
                                                            tmp_path: Path) -> None:
    result = build_report(samples, tmp_path)
    markdown = Path(result["path"]).read_text(encoding="utf-8")
    assert markdown == result["markdown"]
    assert markdown.startswith("# Weekly KPI report\n")
    assert "⚠️ signups changed by -13.7%" in markdown
    assert "| signups | 522 | 605 | -83 | ▼ -13.7% |" in markdown
    assert "![Chart](chart.png)" in markdown
    assert Path(result["chart_file"]) == tmp_path / "report" / "chart.png"
    assert Path(result["chart_file"]).is_file()


def test_markdown_to_html_inlines_the_chart_and_escapes_text(samples: Path,
                                                             tmp_path: Path) -> None:
    report = build_report(samples, tmp_path)
    result = run_skill("markdown-to-html", path=report["path"], output_dir=report["output_dir"])
    html = result["html"]
    assert Path(result["path"]).name == "kpi-report.html"
    assert result["images_embedded"] == 1
    assert re.search(r'<img alt="Chart" src="data:image/png;base64,[A-Za-z0-9+/=]{100,}">', html)
    assert "<title>Weekly KPI report</title>" in html
    assert '<td style="text-align:right">522</td>' in html
    escaped = run_skill("markdown-to-html", markdown="# T\n\nA <script>x</script> & **b**",
                        output_dir=str(tmp_path))
    assert "A &lt;script&gt;x&lt;/script&gt; &amp; <strong>b</strong>" in escaped["html"]


def test_markdown_to_pdf_renders_the_report(samples: Path, tmp_path: Path) -> None:
    report = build_report(samples, tmp_path)
    result = run_skill("markdown-to-pdf", path=report["path"], output_dir=str(tmp_path / "pdf"))
    reader = PdfReader(result["path"])
    assert result["pages"] == len(reader.pages) >= 1
    text = reader.pages[0].extract_text()
    assert "Weekly KPI report" in text and "signups" in text and "31,108.05" in text
    assert reader.metadata is not None and reader.metadata.title == "Weekly KPI report"
    assert any(reader.pages[0].images), "the chart is embedded"


def test_markdown_to_pdf_names_the_font_input_for_chinese(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^font_path: the text contains '周'"):
        call_skill("markdown-to-pdf", markdown="# 周报", output_dir=str(tmp_path))
