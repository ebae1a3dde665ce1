"""Alert rules over KPI values and their changes."""

from __future__ import annotations

from typing import Any

# rule name: (field of the change record it reads, True for a lower bound)
_LIMITS = {
    "min": ("current", True),
    "max": ("current", False),
    "min_change_pct": ("change_pct", True),
    "max_change_pct": ("change_pct", False),
}


def run(changes: list[dict[str, Any]], rules: list[dict[str, Any]]) -> dict[str, Any]:
    if not isinstance(changes, list) or not all(isinstance(c, dict) and "metric" in c
                                                for c in changes):
        raise ValueError("changes: must be a list of objects with 'metric' (from compare-periods)")
    if not isinstance(rules, list):
        raise ValueError("rules: must be a list of rule objects")
    by_metric = {c["metric"]: c for c in changes}
    alerts: list[dict[str, Any]] = []
    for index, rule in enumerate(rules):
        if not isinstance(rule, dict) or "metric" not in rule:
            raise ValueError(f"rules[{index}]: needs a 'metric' and at least one limit")
        metric = rule["metric"]
        if metric not in by_metric:
            raise ValueError(f"rules[{index}].metric: {metric!r} is not among the compared "
                             f"metrics ({', '.join(by_metric)})")
        limits = [k for k in rule if k != "metric"]
        unknown = [k for k in limits if k not in _LIMITS]
        if unknown or not limits:
            raise ValueError(f"rules[{index}]: use min, max, min_change_pct or max_change_pct"
                             + (f", not {', '.join(unknown)}" if unknown else ""))
        for name in limits:
            limit = rule[name]
            if not isinstance(limit, int | float) or isinstance(limit, bool):
                raise ValueError(f"rules[{index}].{name}: must be a number, not {limit!r}")
            field, lower_bound = _LIMITS[name]
            value = by_metric[metric].get(field)
            if value is None or (value >= limit if lower_bound else value <= limit):
                continue
            alerts.append({"metric": metric, "rule": name, "value": value, "limit": limit,
                           "message": _message(metric, field, lower_bound, value, limit)})
    summary = "\n".join(a["message"] for a in alerts) or "All KPIs within limits."
    return {"alerts": alerts, "alert_count": len(alerts), "has_alerts": bool(alerts),
            "summary": summary}


def _message(metric: str, field: str, lower_bound: bool, value: float, limit: float) -> str:
    if field == "change_pct":
        side = "below" if lower_bound else "above"
        return f"{metric} changed by {value:+g}%, {side} the limit of {limit:+g}%"
    side = "below the minimum" if lower_bound else "above the maximum"
    return f"{metric} is {value:g}, {side} of {limit:g}"
