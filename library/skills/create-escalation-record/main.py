"""Append an escalation to a JSON Lines log, once per ticket."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LOG_NAME = "escalations.jsonl"


def run(ticket_id: str, priority: str, summary: str, category: str = "general",
        customer_email: str = "", response_due: str = "", reasons: list[str] | None = None,
        output_dir: str = "") -> dict[str, Any]:
    if not str(ticket_id or "").strip():
        raise ValueError("ticket_id: the ticket to escalate has no id")
    if priority not in ("urgent", "high", "normal", "low"):
        raise ValueError(f"priority: expected urgent, high, normal or low, not {priority!r}")
    if not str(summary or "").strip():
        raise ValueError("summary: say what is wrong and what the customer needs")
    folder = (Path(output_dir).expanduser() if output_dir
              else _default_folder("skillgrove-escalations-"))
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / LOG_NAME
    existing = _read(log)
    for record in existing:
        if record.get("ticket_id") == ticket_id:
            return {"escalation_id": record["escalation_id"], "created": False, "path": str(log),
                    "open_count": len(existing), "record": record}
    now = datetime.now(UTC).replace(microsecond=0)
    digest = hashlib.sha256(ticket_id.encode("utf-8")).hexdigest()[:6].upper()
    record = {
        "escalation_id": f"ESC-{now:%Y%m%d}-{digest}",
        "ticket_id": ticket_id,
        "priority": priority,
        "category": category,
        "summary": " ".join(summary.split()),
        "customer_email": customer_email,
        "response_due": response_due,
        "reasons": list(reasons or []),
        "status": "open",
        "created_at": now.isoformat(),
    }
    with log.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return {"escalation_id": record["escalation_id"], "created": True, "path": str(log),
            "open_count": len(existing) + 1, "record": record}


def _read(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    records = []
    for number, line in enumerate(log.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"output_dir: {log} line {number} is not valid JSON ({exc.msg}); "
                             "fix or move the file") from exc
    return records


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
