"""Line and bar charts written as PNG with the standard library only (zlib + struct)."""

from __future__ import annotations

import csv
import math
import os
import re
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Any

PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
           (140, 86, 75)]
INK, GRID, WHITE = (40, 40, 40), (225, 225, 225), (255, 255, 255)
# 3x5 bitmap font: 15 bits per glyph, row by row.
FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111",
    "3": "111001111001111", "4": "101101111001001", "5": "111100111001111",
    "6": "111100111101111", "7": "111001001001001", "8": "111101111101111",
    "9": "111101111001111", "A": "010101111101101", "B": "110101110101110",
    "C": "011100100100011", "D": "110101101101110", "E": "111100110100111",
    "F": "111100110100100", "G": "011100101101011", "H": "101101111101101",
    "I": "111010010010111", "J": "001001001101010", "K": "101101110101101",
    "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "010101101101010", "P": "110101110100100", "Q": "010101101110011",
    "R": "110101110101101", "S": "011100010001110", "T": "111010010010010",
    "U": "101101101101111", "V": "101101101101010", "W": "101101111111101",
    "X": "101101010101101", "Y": "101101010010010", "Z": "111001010100111",
    " ": "000000000000000", ".": "000000000000010", ",": "000000000010100",
    "-": "000000111000000", "+": "000010111010000", "%": "101001010100101",
    ":": "000010000010000", "/": "001001010100100", "(": "010100100100010",
    ")": "010001001001010", "_": "000000000000111", "=": "000111000111000",
    "?": "111001010000010", "#": "101111101111101", "$": "011110010011110",
    "'": "010010000000000", "&": "010101010101011",
}


class Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(WHITE * (width * height))

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: tuple[int, int, int]) -> None:
        left, right = max(0, min(x0, x1)), min(self.width - 1, max(x0, x1))
        if left > right:
            return
        row = bytes(color) * (right - left + 1)
        for y in range(max(0, min(y0, y1)), min(self.height, max(y0, y1) + 1)):
            start = (y * self.width + left) * 3
            self.pixels[start:start + len(row)] = row

    def line(self, x0: int, y0: int, x1: int, y1: int, color: tuple[int, int, int],
             thickness: int = 1) -> None:
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        half = thickness // 2
        for step in range(steps + 1):
            x = round(x0 + (x1 - x0) * step / steps)
            y = round(y0 + (y1 - y0) * step / steps)
            self.rect(x - half, y - half, x - half + thickness - 1, y - half + thickness - 1,
                      color)

    def text(self, x: int, y: int, text: str, color: tuple[int, int, int], scale: int = 2
             ) -> None:
        for char in text.upper():
            glyph = FONT.get(char, FONT["?"])
            for index, bit in enumerate(glyph):
                if bit == "1":
                    gx, gy = x + (index % 3) * scale, y + (index // 3) * scale
                    self.rect(gx, gy, gx + scale - 1, gy + scale - 1, color)
            x += 4 * scale

    def png(self) -> bytes:
        stride = self.width * 3
        raw = b"".join(b"\x00" + self.pixels[y * stride:(y + 1) * stride]
                       for y in range(self.height))

        def chunk(tag: bytes, data: bytes) -> bytes:
            return (struct.pack(">I", len(data)) + tag + data
                    + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def text_width(text: str, scale: int = 2) -> int:
    return len(text) * 4 * scale - scale


def run(x_column: str, y_columns: list[str], csv_path: str = "",
        rows: list[dict[str, Any]] | None = None, kind: str = "line", title: str = "",
        width: int = 800, height: int = 400, output_dir: str = "", filename: str = "chart.png"
        ) -> dict[str, Any]:
    records = _records(csv_path, rows)
    if kind not in ("line", "bar"):
        raise ValueError(f"kind: expected 'line' or 'bar', not {kind!r}")
    if not y_columns or len(y_columns) > len(PALETTE):
        raise ValueError(f"y_columns: give between 1 and {len(PALETTE)} columns")
    if not (200 <= width <= 4000 and 150 <= height <= 4000):
        raise ValueError(f"width/height: {width}x{height} is outside 200x150 .. 4000x4000")
    keys = set().union(*(r.keys() for r in records))
    for name, value in [("x_column", x_column), *(("y_columns", c) for c in y_columns)]:
        if value not in keys:
            raise ValueError(f"{name}: no column {value!r}; columns are: {', '.join(sorted(keys))}")
    if not re.fullmatch(r"[\w.-]+\.png", filename or ""):
        raise ValueError(f"filename: {filename!r} must be a plain file name ending in .png")
    labels = [str(r.get(x_column, "")) for r in records]
    series = {c: [_number(r.get(c)) for r in records] for c in y_columns}
    values = [v for vs in series.values() for v in vs if v is not None]
    if not values:
        raise ValueError(f"y_columns: {', '.join(y_columns)} hold no numbers")

    canvas = Canvas(width, height)
    left, right, top, bottom = 70, width - 20, 62 if title else 36, height - 45
    low, high, step = _ticks(min([*values, 0.0] if kind == "bar" else values), max(values))

    def to_y(value: float) -> int:
        return round(bottom - (value - low) / (high - low) * (bottom - top))

    tick = low
    while tick <= high + step / 2:
        y = to_y(tick)
        canvas.line(left, y, right, y, GRID)
        label = _short(tick)
        canvas.text(left - 8 - text_width(label), y - 5, label, INK)
        tick += step
    canvas.line(left, top, left, bottom, INK)
    canvas.line(left, bottom, right, bottom, INK)
    if title:
        canvas.text((width - text_width(title, 3)) // 2, 12, title, INK, scale=3)

    count = len(records)
    slot = (right - left) / max(count, 1)
    centers = [round(left + slot * (i + 0.5)) for i in range(count)]
    for index in sorted({0, count // 2, count - 1}):
        label = labels[index][:12]
        x = min(max(centers[index] - text_width(label) // 2, 2), width - text_width(label) - 2)
        canvas.line(centers[index], bottom, centers[index], bottom + 4, INK)
        canvas.text(x, bottom + 10, label, INK)

    for number, points in enumerate(series.values()):
        color = PALETTE[number]
        if kind == "bar":
            bar = max(1, int(slot * 0.8 / len(series)))
            for i, value in enumerate(points):
                if value is not None:
                    x0 = round(left + slot * i + slot * 0.1 + bar * number)
                    canvas.rect(x0, to_y(value), x0 + bar - 1, to_y(max(low, 0.0)), color)
        else:
            previous = None
            for i, value in enumerate(points):
                if value is None:
                    previous = None
                    continue
                point = (centers[i], to_y(value))
                if previous:
                    canvas.line(*previous, *point, color, thickness=3)
                canvas.rect(point[0] - 2, point[1] - 2, point[0] + 2, point[1] + 2, color)
                previous = point
    legend_x, legend_y = left, top - 20  # one row above the plot, so it never hides data
    for number, name in enumerate(series):
        canvas.rect(legend_x, legend_y, legend_x + 9, legend_y + 9, PALETTE[number])
        canvas.text(legend_x + 16, legend_y, name[:16], INK)
        legend_x += 16 + text_width(name[:16]) + 24

    folder = Path(output_dir).expanduser() if output_dir else _default_folder("skillgrove-chart-")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    path.write_bytes(canvas.png())
    return {"path": str(path), "width": width, "height": height, "series": list(y_columns),
            "points": count}


def _records(csv_path: str, rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    if csv_path:
        file = Path(csv_path).expanduser()
        if not file.is_file():
            raise ValueError(f"csv_path: no such file: {file}")
        with file.open(encoding="utf-8-sig", newline="") as handle:
            records: list[dict[str, Any]] = [
                {(k or "").strip(): v for k, v in row.items()} for row in csv.DictReader(handle)]
    elif rows:
        if not all(isinstance(r, dict) for r in rows):
            raise ValueError("rows: must be a list of objects")
        records = rows
    else:
        raise ValueError("csv_path or rows: give the data to plot")
    if not records:
        raise ValueError("csv_path or rows: there are no data rows")
    return records


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    try:
        return float(re.sub(r"[\s$€£¥,%]", "", str(value or "")))
    except ValueError:
        return None


def _ticks(low: float, high: float) -> tuple[float, float, float]:
    """A 'nice' axis range and step covering low..high in about five steps."""
    if high == low:
        high, low = high + 1, low - 1
    raw = (high - low) / 5
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return math.floor(low / step) * step, math.ceil(high / step) * step, step


def _short(value: float) -> str:
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= size:
            return f"{value / size:.1f}".rstrip("0").rstrip(".") + suffix
    return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
