"""Markdown rendered to an A4 PDF with fpdf2."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from fpdf import FPDF
from fpdf.fonts import FontFace

PLAIN = str.maketrans({"–": "-", "—": "-", "‘": "'", "’": "'", "“": '"', "”": '"', "…": "...",
                       "•": "-", "▲": "", "▼": "", "→": "->", "⚠": "!", "\ufe0f": "",
                       "✓": "v", "€": "EUR "})


class _Document(FPDF):
    font_family_name = "Helvetica"

    def footer(self) -> None:
        self.set_y(-14)
        self.set_font(self.font_family_name, size=8)
        self.set_text_color(120, 120, 120)
        self.cell(0, 8, f"Page {self.page_no()} of {{nb}}", align="C")
        self.set_text_color(0, 0, 0)


def run(markdown: str = "", path: str = "", title: str = "", font_path: str = "",
        line_breaks: bool = False, output_dir: str = "", filename: str = "") -> dict[str, Any]:
    base = Path.cwd()
    if path:
        source = Path(path).expanduser()
        if not source.is_file():
            raise ValueError(f"path: no such file: {source}")
        markdown, base = source.read_text(encoding="utf-8"), source.parent
    if not (markdown or "").strip():
        raise ValueError("markdown or path: there is no Markdown to render")
    name = filename or (Path(path).stem + ".pdf" if path else "document.pdf")
    if not re.fullmatch(r"[\w.-]+\.pdf", name):
        raise ValueError(f"filename: {name!r} must be a plain file name ending in .pdf")
    heading = re.search(r"^#\s+(.+)$", markdown, re.MULTILINE)
    doc_title = title or (heading.group(1).strip() if heading else "Document")

    pdf = _Document(format="A4")
    if font_path:
        font = Path(font_path).expanduser()
        if not font.is_file():
            raise ValueError(f"font_path: no such file: {font}")
        for style in ("", "B", "I", "BI"):
            pdf.add_font("Body", style, str(font))
        pdf.font_family_name = "Body"
    else:
        markdown = markdown.translate(PLAIN)
        doc_title = doc_title.translate(PLAIN)
        bad = next((c for c in markdown + doc_title if ord(c) > 255), None)
        if bad:
            raise ValueError(f"font_path: the text contains {bad!r}, which the built-in font "
                             "cannot show; give a TrueType font that has it")
    pdf.set_title(doc_title)
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.add_page()
    _render(pdf, markdown.replace("\r\n", "\n").split("\n"), base, line_breaks)
    folder = Path(output_dir).expanduser() if output_dir else _default_folder("skillgrove-pdf-")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    pdf.output(str(target))
    return {"path": str(target), "pages": pdf.page_no(), "title": doc_title}


def _inline(text: str) -> str:
    """Markdown emphasis to fpdf2's markup: **bold** stays, *italic* becomes __italic__."""
    text = re.sub(r"`([^`]+)`", r"\1", text)
    text = re.sub(r"!?\[([^\]]*)\]\(([^)]+)\)", r"\1 (\2)", text)
    text = re.sub(r"(?<![\w*])\*(?!\s)([^*]+?)\*(?!\w)|(?<!\w)_(?!\s)([^_]+?)_(?!\w)",
                  lambda m: f"__{m.group(1) or m.group(2)}__", text)
    return text


def _render(pdf: _Document, lines: list[str], base: Path, line_breaks: bool) -> None:
    family = pdf.font_family_name
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        stripped = line.strip()
        pdf.set_font(family, size=11)
        if not stripped:
            pdf.ln(2)
            i += 1
        elif stripped.startswith("```"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```")),
                       len(lines))
            pdf.set_font("Courier", size=9)
            pdf.set_fill_color(244, 244, 244)
            pdf.multi_cell(0, 5, "\n".join(lines[i + 1:end]) or " ", fill=True,
                           new_x="LMARGIN", new_y="NEXT")
            i = end + 1
        elif m := re.match(r"^(#{1,6})\s+(.*?)\s*#*$", stripped):
            size = {1: 18, 2: 14, 3: 12}.get(len(m.group(1)), 11)
            pdf.ln(3)
            pdf.set_font(family, "B", size)
            pdf.multi_cell(0, size * 0.55, _inline(m.group(2)).replace("__", ""),
                           new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
            i += 1
        elif re.fullmatch(r"(-{3,}|\*{3,}|_{3,})", stripped):
            pdf.line(pdf.l_margin, pdf.get_y() + 2, pdf.w - pdf.r_margin, pdf.get_y() + 2)
            pdf.ln(5)
            i += 1
        elif image := re.fullmatch(r"!\[([^\]]*)\]\(([^)\s]+)\)", stripped):
            picture = base / image.group(2)
            if picture.is_file():
                pdf.image(str(picture), w=min(pdf.epw, 170))
                pdf.ln(2)
            else:
                pdf.multi_cell(0, 6, f"[image not found: {image.group(2)}]",
                               new_x="LMARGIN", new_y="NEXT")
            i += 1
        elif stripped.startswith("|") and i + 1 < len(lines) and re.fullmatch(
                r"\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?", lines[i + 1].strip()):
            end = i + 2
            while end < len(lines) and lines[end].strip().startswith("|"):
                end += 1
            rows = [lines[i], *lines[i + 2:end]]
            _table(pdf, [[c.strip().replace("\\|", "|") for c in
                          re.split(r"(?<!\\)\|", r.strip().strip("|"))] for r in rows])
            i = end
        elif m := re.match(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$", line):
            indent = 6 + min(len(m.group(1)), 8) * 2
            bullet = "-" if m.group(2) in "-*+" else m.group(2)
            pdf.set_x(pdf.l_margin + indent - 5)
            pdf.cell(5, 6, bullet)
            pdf.multi_cell(0, 6, _inline(m.group(3)), markdown=True, new_x="LMARGIN",
                           new_y="NEXT")
            i += 1
        else:
            end = i
            while end < len(lines) and lines[end].strip() and not re.match(
                    r"^\s*(#{1,6}\s|```|\||!\[|([-*+]|\d+[.)])\s)", lines[end]):
                end += 1
            end = max(end, i + 1)
            text = ("\n" if line_breaks else " ").join(ln.strip().lstrip("> ")
                                                       for ln in lines[i:end])
            pdf.multi_cell(0, 6, _inline(text), markdown=True, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
            i = end


def _table(pdf: _Document, rows: list[list[str]]) -> None:
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    pdf.set_font(pdf.font_family_name, size=9 if width > 4 else 10)
    heading = FontFace(emphasis="BOLD", fill_color=(232, 236, 240))
    with pdf.table(headings_style=heading, line_height=6, cell_fill_color=(248, 249, 250),
                   cell_fill_mode="ROWS") as table:
        for cells in rows:
            row = table.row()
            for cell in cells:
                row.cell(_inline(cell).replace("__", "").replace("**", ""))
    pdf.ln(3)


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
