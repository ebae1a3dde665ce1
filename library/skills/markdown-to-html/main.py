"""A small Markdown to HTML converter with inlined images and a built-in stylesheet."""

from __future__ import annotations

import base64
import html
import mimetypes
import os
import re
import tempfile
from pathlib import Path
from typing import Any

STYLE = """body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,'PingFang SC','Microsoft YaHei',
sans-serif;max-width:860px;margin:2em auto;padding:0 1em;color:#222;line-height:1.55}
h1,h2,h3{line-height:1.25}h1{border-bottom:2px solid #eee;padding-bottom:.3em}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ddd;padding:.35em .7em}
th{background:#f6f8fa}img{max-width:100%}code{background:#f6f8fa;padding:.1em .3em}
pre{background:#f6f8fa;padding:1em;overflow:auto}blockquote{color:#555;border-left:4px solid #ddd;
margin-left:0;padding-left:1em}"""


def run(markdown: str = "", path: str = "", title: str = "", embed_images: bool = True,
        output_dir: str = "", filename: str = "") -> dict[str, Any]:
    if path:
        source = Path(path).expanduser()
        if not source.is_file():
            raise ValueError(f"path: no such file: {source}")
        markdown, base = source.read_text(encoding="utf-8"), source.parent
    else:
        base = Path.cwd()
    if not (markdown or "").strip():
        raise ValueError("markdown or path: there is no Markdown to convert")
    converter = _Converter(base, embed_images)
    body = converter.blocks(markdown.replace("\r\n", "\n").split("\n"))
    heading = re.search(r"^#\s+(.+)$", markdown, re.MULTILINE)
    page_title = title or (heading.group(1).strip() if heading else "Document")
    page = (f'<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(page_title)}</title>\n<style>{STYLE}</style>\n</head>\n"
            f"<body>\n{body}\n</body>\n</html>\n")
    name = filename or (Path(path).stem + ".html" if path else "document.html")
    if not re.fullmatch(r"[\w.-]+\.html?", name):
        raise ValueError(f"filename: {name!r} must be a plain file name ending in .html")
    folder = Path(output_dir).expanduser() if output_dir else _default_folder("skillgrove-html-")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    target.write_text(page, encoding="utf-8")
    return {"html": page, "path": str(target), "images_embedded": converter.embedded}


class _Converter:
    def __init__(self, base: Path, embed: bool) -> None:
        self.base, self.embed, self.embedded = base, embed, 0

    def blocks(self, lines: list[str]) -> str:
        out: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if not stripped:
                i += 1
            elif stripped.startswith("```"):
                end = next((j for j in range(i + 1, len(lines)) if lines[j].strip()
                            .startswith("```")), len(lines))
                code = html.escape("\n".join(lines[i + 1:end]))
                out.append(f"<pre><code>{code}</code></pre>")
                i = end + 1
            elif m := re.match(r"^(#{1,6})\s+(.*?)\s*#*$", stripped):
                level = len(m.group(1))
                out.append(f"<h{level}>{self.inline(m.group(2))}</h{level}>")
                i += 1
            elif re.fullmatch(r"(-{3,}|\*{3,}|_{3,})", stripped):
                out.append("<hr>")
                i += 1
            elif stripped.startswith("|") and i + 1 < len(lines) and re.fullmatch(
                    r"\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?", lines[i + 1].strip()):
                end = i + 2
                while end < len(lines) and lines[end].strip().startswith("|"):
                    end += 1
                out.append(self.table(lines[i], lines[i + 1], lines[i + 2:end]))
                i = end
            elif stripped.startswith(">"):
                end = i
                while end < len(lines) and lines[end].strip().startswith(">"):
                    end += 1
                inner = [re.sub(r"^\s*>\s?", "", ln) for ln in lines[i:end]]
                out.append(f"<blockquote>{self.blocks(inner)}</blockquote>")
                i = end
            elif re.match(r"^\s*([-*+]|\d+[.)])\s+", line):
                ordered = bool(re.match(r"^\s*\d", line))
                items = []
                while i < len(lines) and (m := re.match(r"^\s*([-*+]|\d+[.)])\s+(.*)$", lines[i])):
                    items.append(f"<li>{self.inline(m.group(2))}</li>")
                    i += 1
                tag = "ol" if ordered else "ul"
                out.append(f"<{tag}>\n" + "\n".join(items) + f"\n</{tag}>")
            else:
                end = i
                while end < len(lines) and lines[end].strip() and not re.match(
                        r"^\s*(#{1,6}\s|```|>|\||([-*+]|\d+[.)])\s)", lines[end]):
                    end += 1
                end = max(end, i + 1)
                text = " ".join(ln.strip() for ln in lines[i:end])
                out.append(f"<p>{self.inline(text)}</p>")
                i = end
        return "\n".join(out)

    def table(self, head: str, rule: str, rows: list[str]) -> str:
        def cells(line: str) -> list[str]:
            parts = re.split(r"(?<!\\)\|", line.strip().strip("|"))
            return [p.strip().replace("\\|", "|") for p in parts]

        aligns = ["right" if c.endswith(":") and not c.startswith(":") else
                  "center" if c.startswith(":") and c.endswith(":") else "" for c in cells(rule)]

        def row(line: str, tag: str) -> str:
            out = []
            for index, cell in enumerate(cells(line)):
                align = aligns[index] if index < len(aligns) else ""
                style = f' style="text-align:{align}"' if align else ""
                out.append(f"<{tag}{style}>{self.inline(cell)}</{tag}>")
            return "<tr>" + "".join(out) + "</tr>"

        body = "\n".join(row(r, "td") for r in rows)
        return f"<table>\n<thead>{row(head, 'th')}</thead>\n<tbody>\n{body}\n</tbody>\n</table>"

    def inline(self, text: str) -> str:
        codes: list[str] = []

        def keep_code(m: re.Match[str]) -> str:
            codes.append(f"<code>{html.escape(m.group(1))}</code>")
            return f"\x00{len(codes) - 1}\x00"

        text = re.sub(r"`([^`]+)`", keep_code, text)
        text = html.escape(text, quote=False).replace("&lt;br&gt;", "<br>")
        text = re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", self.image, text)
        text = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)",
                      lambda m: f'<a href="{self.url(m.group(2))}">{m.group(1)}</a>', text)
        text = re.sub(r"\*\*(.+?)\*\*|__(.+?)__",
                      lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", text)
        text = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?!\w)|(?<!\w)_(?!\s)(.+?)(?<!\s)_(?!\w)",
                      lambda m: f"<em>{m.group(1) or m.group(2)}</em>", text)
        return re.sub(r"\x00(\d+)\x00", lambda m: codes[int(m.group(1))], text)

    def url(self, target: str) -> str:
        if re.match(r"^\s*(javascript|vbscript|data):", target, re.IGNORECASE):
            return "#"
        return html.escape(html.unescape(target), quote=True)

    def image(self, m: re.Match[str]) -> str:
        alt, src = m.group(1), html.unescape(m.group(2))
        local = self.base / src
        if self.embed and not re.match(r"^[a-z]+:", src) and local.is_file():
            ctype = mimetypes.guess_type(local.name)[0] or "application/octet-stream"
            data = base64.b64encode(local.read_bytes()).decode("ascii")
            self.embedded += 1
            return f'<img alt="{alt}" src="data:{ctype};base64,{data}">'
        return f'<img alt="{alt}" src="{self.url(src)}">'


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
