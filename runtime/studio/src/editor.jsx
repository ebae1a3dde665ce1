// The group editor: a canvas of the group's inputs, context values and steps, wired output to
// input; a palette; a properties panel; the check, save, plan and run. Every edit goes
// through one history (undo / redo); where a node sits is the user's, kept per file in this
// browser.
import { useCallback, useContext, useEffect, useMemo, useRef, useState } from "react";
import {
  Background, Controls, Handle, MarkerType, Position, ReactFlow, useConnection, useReactFlow,
} from "@xyflow/react";
import { ApiError, call, streamRun } from "./api.js";
import {
  clone, compatible, contextNames, contract, diffEdits, downstreamOf, inputSpecs, isObject,
  layoutAll, needsOf, newStepId, nodeWidth, reference, referencesIn, renameStep, sourceId, sourceReference,
  stepsOf, typeName,
} from "./model.js";
import { Dialog, EditorContext, Studio, plural } from "./shared.jsx";
import { GroupPanel, Palette, StepPanel } from "./panels.jsx";
import { EFFECTS, RunPanel } from "./run.jsx";

const SOURCE_WIDTH = 190;
const MIN_FIRST_ZOOM = 0.85; // 13 px handle labels stay at 11 px or more

// The first view: the whole group when it fits at a zoom where the labels are readable;
// else readable, from its top left corner (the user scrolls or zooms out for the rest).
function readableView(instance, canvas) {
  const box = canvas && canvas.getBoundingClientRect();
  const all = instance.getNodes();
  if (!box || !box.width || !all.length) return;
  const size = (n) => ({ w: (n.measured && n.measured.width) || n.width || 250, h: (n.measured && n.measured.height) || 90 });
  const x0 = Math.min(...all.map((n) => n.position.x));
  const y0 = Math.min(...all.map((n) => n.position.y));
  const x1 = Math.max(...all.map((n) => n.position.x + size(n).w));
  const y1 = Math.max(...all.map((n) => n.position.y + size(n).h));
  const pad = 20;
  const fit = Math.min((box.width - 2 * pad) / (x1 - x0), (box.height - 2 * pad) / (y1 - y0));
  const zoom = Math.min(1, Math.max(MIN_FIRST_ZOOM, fit));
  const fitsWide = (x1 - x0) * zoom <= box.width - 2 * pad;
  const fitsHigh = (y1 - y0) * zoom <= box.height - 2 * pad;
  instance.setViewport({
    x: fitsWide ? (box.width - (x1 - x0) * zoom) / 2 - x0 * zoom : pad - x0 * zoom,
    y: fitsHigh ? (box.height - (y1 - y0) * zoom) / 2 - y0 * zoom : pad - y0 * zoom,
    zoom,
  });
}
const LAYOUT_KEY = "skillgrove-layout:";

function storedPositions(path) {
  try { const v = JSON.parse(localStorage.getItem(LAYOUT_KEY + path) || "{}"); return isObject(v) ? v : {}; }
  catch { return {}; }
}

function storePositions(path, positions) {
  try { localStorage.setItem(LAYOUT_KEY + path, JSON.stringify(positions)); } catch { /* full or off */ }
}

// The group's inputs and the context values it reads, as the canvas shows them; a context
// value's type is the type of the first step input it feeds.
export function sourcesOf(doc, declared, skills, groups) {
  const out = Object.entries(inputSpecs(doc)).map(([name, spec]) => ({
    id: sourceId("inputs", name), kind: "inputs", name, type: typeof spec.type === "string" ? spec.type : null,
    required: spec.required === true, spec,
  }));
  for (const name of contextNames(doc, declared)) {
    let type = null;
    for (const step of stepsOf(doc)) {
      const c = contract(step, skills, groups);
      for (const [input, value] of Object.entries(isObject(step.with) ? step.with : {})) {
        if (!type && value === sourceReference("context", name)) type = typeName(c.inputs[input]);
      }
    }
    out.push({ id: sourceId("context", name), kind: "context", name, type, required: false });
  }
  return out;
}

function equalJson(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

export function Editor({ editing, setEditing, onDirty }) {
  const { skills, groups, reload, openGroup, approve } = useContext(Studio);
  const isNew = editing.original === null;
  const flow = useReactFlow();

  const widthOf = useCallback((step) => {
    const c = contract(step, skills, groups);
    return nodeWidth(Math.max(Object.keys(c.inputs).length, Object.keys(c.outputs).length));
  }, [skills, groups]);

  // -- the history: every edit of the document, the layout and the context values ------------
  const [hist, setHist] = useState(() => {
    const doc = editing.doc;
    const sources = sourcesOf(doc, [], skills, groups);
    const positions = { ...layoutAll(doc, widthOf, sources), ...storedPositions(editing.path) };
    return { past: [], present: { doc, positions, context: [] }, future: [], key: null, at: 0 };
  });
  const { doc, positions, context: declaredContext } = hist.present;
  // `key` merges quick edits of one field (typing) into one step of the history.
  const commit = useCallback((change, key = null) => setHist((h) => {
    const next = change(h.present);
    if (next === h.present || equalJson(next, h.present)) return h;
    const now = Date.now();
    const merge = key !== null && h.key === key && now - h.at < 1500;
    return { past: merge ? h.past : [...h.past, h.present].slice(-300), present: next, future: [], key, at: now };
  }), []);
  const update = useCallback((change, key = null) => commit((p) => {
    const d = clone(p.doc);
    change(d);
    return { ...p, doc: d };
  }, key), [commit]);
  const undo = useCallback(() => setHist((h) => (h.past.length ? {
    past: h.past.slice(0, -1), present: h.past.at(-1), future: [h.present, ...h.future], key: null, at: 0,
  } : h)), []);
  const redo = useCallback(() => setHist((h) => (h.future.length ? {
    past: [...h.past, h.present], present: h.future[0], future: h.future.slice(1), key: null, at: 0,
  } : h)), []);

  const [path, setPath] = useState(editing.path);
  const [pathTouched, setPathTouched] = useState(!isNew);
  const [selected, setSelected] = useState(null);
  const [selectedEdges, setSelectedEdges] = useState([]); // chosen connections (Delete removes them)
  const [check, setCheck] = useState(null);
  const [preview, setPreview] = useState(null);
  const [message, setMessage] = useState(editing.notice || null);
  const [states, setStates] = useState({});
  const [confirm, setConfirm] = useState(null);
  const [plan, setPlan] = useState(null);
  const [measured, setMeasured] = useState({});
  const dragStart = useRef(null);
  const canvasRef = useRef(null);
  // The first view fits what the file holds; a new group's canvas never moves by itself.
  const hadNodes = useRef(stepsOf(editing.doc).length > 0);

  // The file name follows the id of a new group until the user names the file.
  useEffect(() => {
    if (!pathTouched && typeof doc.id === "string" && doc.id.trim()) setPath(`${doc.id.trim()}.yaml`);
  }, [doc.id, pathTouched]);

  useEffect(() => { storePositions(path, positions); }, [path, positions]);

  const dirty = isNew ? stepsOf(doc).length > 0 || Object.keys(inputSpecs(doc)).length > 0
    : diffEdits(editing.original, doc).length > 0;
  useEffect(() => { onDirty(dirty); }, [dirty, onDirty]);
  useEffect(() => {
    if (!dirty) return undefined;
    const warn = (e) => { e.preventDefault(); e.returnValue = ""; };
    window.addEventListener("beforeunload", warn);
    return () => window.removeEventListener("beforeunload", warn);
  }, [dirty]);

  // Ctrl+Z / Ctrl+Shift+Z (and Ctrl+Y); a text field keeps its own undo.
  useEffect(() => {
    const onKey = (e) => {
      if (!(e.ctrlKey || e.metaKey) || e.altKey) return;
      const key = e.key.toLowerCase();
      if (key !== "z" && key !== "y") return;
      const t = e.target;
      const typing = t && (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && !["checkbox", "radio", "button", "submit"].includes(t.type)));
      // not while another view shows (the editor is kept, hidden) or a dialog is open
      if (typing || document.querySelector("dialog[open]") || !(canvasRef.current && canvasRef.current.offsetParent)) return;
      e.preventDefault();
      if (key === "y" || e.shiftKey) redo(); else undo();
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [undo, redo]);

  const source = useCallback(() => (
    isNew ? { document: doc } : { path, edits: diffEdits(editing.original, doc) }
  ), [doc, path, isNew, editing.original]);

  // Live validation: the server's checker, as `skillgrove check` runs it.
  useEffect(() => {
    const timer = setTimeout(async () => {
      try { setCheck(await call("POST", "groups/check", source())); }
      catch (exc) { setCheck({ failed: exc.message, diagnostics: [] }); }
    }, 250);
    return () => clearTimeout(timer);
  }, [source]);

  const byStep = useMemo(() => {
    const out = {};
    for (const d of (check && check.diagnostics) || []) {
      if (d.step_id) (out[d.step_id] = out[d.step_id] || []).push(d);
    }
    return out;
  }, [check]);

  const sources = useMemo(() => sourcesOf(doc, declaredContext, skills, groups), [doc, declaredContext, skills, groups]);
  const steps = stepsOf(doc);

  // Where a node without a place goes: a step below the lowest node, an input or context
  // value beside the others in the top row.
  const placeFor = (kind, taken) => {
    const all = Object.entries(taken);
    if (!all.length) return { x: 40, y: 40 };
    if (kind === "source") {
      const row = all.filter(([id]) => id.includes("."));
      if (row.length) {
        const right = Math.max(...row.map(([, p]) => p.x));
        const top = Math.min(...row.map(([, p]) => p.y));
        return { x: right + SOURCE_WIDTH + 30, y: top };
      }
      return { x: Math.min(...all.map(([, p]) => p.x)), y: Math.min(...all.map(([, p]) => p.y)) - 120 };
    }
    const lowest = all.reduce((a, b) => (b[1].y > a[1].y ? b : a));
    return { x: lowest[1].x, y: lowest[1].y + 180 };
  };

  // Nodes that appeared without a place (an input added in the panel, a value read in an
  // expression) get one once, outside the history.
  useEffect(() => {
    const missing = [...sources.map((s) => [s.id, "source"]), ...steps.map((s) => [String(s.id), "step"])]
      .filter(([id]) => !positions[id]);
    if (!missing.length) return;
    setHist((h) => {
      const next = { ...h.present.positions };
      for (const [id, kind] of missing) if (!next[id]) next[id] = placeFor(kind, next);
      return { ...h, present: { ...h.present, positions: next } };
    });
  });

  const addStep = (kind, name, at = null) => {
    const id = newStepId(doc, name);
    commit((p) => {
      const d = clone(p.doc);
      d.steps = Array.isArray(d.steps) ? d.steps : [];
      d.steps.push({ id, [kind]: name });
      const width = widthOf({ id, [kind]: name });
      const where = at ? { x: at.x - width / 2, y: at.y - 30 } : placeFor("step", p.positions);
      return { ...p, doc: d, positions: { ...p.positions, [id]: where } };
    });
    setSelected(id);
    setMessage(`Added step ${id}`);
  };

  const onDrop = (e) => {
    e.preventDefault();
    const name = e.dataTransfer.getData("application/x-skillgrove-skill");
    const group = e.dataTransfer.getData("application/x-skillgrove-group");
    const at = flow.screenToFlowPosition({ x: e.clientX, y: e.clientY });
    if (name) addStep("skill", name, at);
    else if (group) addStep("group", group, at);
  };

  const typeOfOutput = (from, output) => {
    const src = sources.find((s) => s.id === from);
    if (src) return src.type;
    const step = steps.find((s) => String(s.id) === from);
    return step ? typeName(contract(step, skills, groups).outputs[output]) : null;
  };

  // An output (of a step, or a group input / context value) into a step's input: the value
  // becomes a reference to it; a step read from is also needed. One value into a list input
  // is a list of one.
  const connect = ({ source: from, sourceHandle, target, targetHandle }) => {
    if (!from || !target || from === target) return;
    const output = (sourceHandle || "").replace(/^out:/, "");
    const input = (targetHandle || "").replace(/^in:/, "");
    if (!output || !input || downstreamOf(doc, target).has(from)) return;
    const src = sources.find((s) => s.id === from);
    let value = src ? sourceReference(src.kind, src.name) : reference(from, output);
    const fromType = typeOfOutput(from, output);
    update((d) => {
      const step = d.steps.find((s) => String(s.id) === target);
      if (!step) return;
      const expected = typeName(contract(step, skills, groups).inputs[input]);
      if (expected === "array" && fromType && fromType !== "array") value = [value];
      step.with = isObject(step.with) ? step.with : {};
      step.with[input] = value;
      if (!src) {
        const needs = needsOf(step);
        if (!needs.includes(from)) step.needs = [...needs, from];
      }
    });
    setSelected(target);
  };

  const isValidConnection = (c) => c.source !== c.target && !c.target.includes(".")
    && !downstreamOf(doc, c.target).has(c.source);

  // Removing steps, inputs and connections (the Delete key, or the panel's buttons).
  const remove = ({ nodes: gone = [], edges: cut = [] }) => {
    const goneIds = new Set(gone.map((n) => n.id));
    commit((p) => {
      const d = clone(p.doc);
      let context = p.context;
      for (const id of goneIds) {
        if (id.startsWith("inputs.") && isObject(d.inputs)) {
          delete d.inputs[id.slice(7)];
          if (!Object.keys(d.inputs).length) delete d.inputs;
        } else if (id.startsWith("context.")) context = context.filter((n) => n !== id.slice(8));
      }
      if (Array.isArray(d.steps)) {
        d.steps = d.steps.filter((s) => !goneIds.has(String(s.id)));
        for (const s of d.steps.filter(isObject)) {
          const needs = needsOf(s).filter((n) => !goneIds.has(n));
          if (needs.length !== needsOf(s).length) { if (needs.length) s.needs = needs; else delete s.needs; }
        }
      }
      for (const edge of cut.filter((e) => !goneIds.has(e.source) && !goneIds.has(e.target))) {
        const step = (d.steps || []).find((s) => String(s.id) === edge.target);
        if (!step) continue;
        const { input } = edge.data || {};
        if (input && isObject(step.with)) {
          delete step.with[input];
          if (!Object.keys(step.with).length) delete step.with;
        }
        const stillRead = referencesIn([step.with, step.if]).some((r) => r.kind === "steps" && r.step === edge.source);
        if (!edge.source.includes(".") && (!input || !stillRead)) {
          const needs = needsOf(step).filter((n) => n !== edge.source);
          if (needs.length) step.needs = needs; else delete step.needs;
        }
      }
      const kept = { ...p.positions };
      for (const id of goneIds) delete kept[id];
      return { doc: d, positions: kept, context };
    });
    if (goneIds.has(selected)) setSelected(null);
  };

  const autoLayout = () => {
    commit((p) => ({ ...p, positions: layoutAll(p.doc, widthOf, sourcesOf(p.doc, p.context, skills, groups)) }));
    setTimeout(() => readableView(flow, canvasRef.current), 80);
  };

  // -- what the canvas draws ----------------------------------------------------------------
  const ids = new Set(steps.map((s) => String(s.id)));
  const nodes = [
    ...sources.map((s) => ({
      id: s.id, type: "source", position: positions[s.id] || { x: 0, y: 0 }, data: { source: s },
      selected: selected === s.id, style: { width: SOURCE_WIDTH }, measured: measured[s.id],
      ariaLabel: `${s.kind === "inputs" ? "Group input" : "Context value"} ${s.name}`,
    })),
    ...steps.map((step) => ({
      id: String(step.id), type: "step", position: positions[step.id] || { x: 0, y: 0 },
      data: { step, diagnostics: byStep[step.id] || [], history: states[step.id] || [] }, selected: selected === step.id,
      style: { width: widthOf(step) }, measured: measured[step.id], ariaLabel: `Step ${step.id}`,
    })),
  ];
  const sourceIds = new Set(sources.map((s) => s.id));
  const edges = steps.flatMap((step) => {
    const running = (states[step.id] || []).at(-1) === "running";
    const c = contract(step, skills, groups);
    const fed = new Set();
    const out = [];
    const seen = new Set();
    const add = (edge) => { if (!seen.has(edge.id)) { seen.add(edge.id); out.push(edge); } };
    for (const [input, value] of Object.entries(isObject(step.with) ? step.with : {})) {
      if (!(input in c.inputs)) continue;
      const refs = referencesIn(value);
      const whole = refs.length === 1 && (typeof value === "string" || (Array.isArray(value) && value.length === 1));
      for (const r of refs) {
        let from; let handle;
        if (r.kind === "steps") {
          const producer = steps.find((s) => s.id === r.step);
          if (!ids.has(r.step) || !producer || !(r.output in contract(producer, skills, groups).outputs)) continue;
          from = r.step; handle = `out:${r.output}`; fed.add(r.step);
        } else {
          from = sourceId(r.kind, r.name); handle = "out:value";
          if (!sourceIds.has(from)) continue;
        }
        add({ id: `${from}/${handle}->${step.id}.${input}`, source: from, target: String(step.id), sourceHandle: handle,
              targetHandle: `in:${input}`, animated: running, markerEnd: { type: MarkerType.ArrowClosed },
              deletable: whole, data: { input } });
      }
    }
    for (const r of referencesIn(step.if)) {
      const from = r.kind === "steps" ? r.step : sourceId(r.kind, r.name);
      if (!(r.kind === "steps" ? ids.has(from) : sourceIds.has(from))) continue;
      if (r.kind === "steps") fed.add(from);
      add({ id: `${from}->${step.id}:if`, source: from, target: String(step.id),
            sourceHandle: r.kind === "steps" ? "after" : "out:value", targetHandle: "before", label: "if",
            style: { strokeDasharray: "2 4" }, deletable: false, markerEnd: { type: MarkerType.ArrowClosed } });
    }
    for (const need of needsOf(step).filter((n) => ids.has(n) && !fed.has(n))) {
      add({ id: `${need}->${step.id}`, source: need, target: String(step.id), sourceHandle: "after",
            targetHandle: "before", markerEnd: { type: MarkerType.ArrowClosed }, animated: running,
            style: { strokeDasharray: "4 3" }, data: {} });
    }
    return out;
  }).map((edge) => (selectedEdges.includes(edge.id) ? { ...edge, selected: true } : edge));

  // -- save, plan, run ------------------------------------------------------------------------
  const save = async (write) => {
    try {
      const body = { ...source(), path, dry_run: !write };
      if (!isNew && editing.sha256) body.base_sha256 = editing.sha256;
      const result = await call("POST", "groups/files", body);
      if (!write) { setPreview(result); return; }
      setPreview(null);
      const notice = `Saved ${result.path}${result.valid ? "" : ` (${plural(result.errors, "problem")} still to fix)`}`;
      storePositions(result.path, positions);
      await reload(); // the notice shows once the saved file is open again
      const id = result.id || doc.id;
      try {
        const fresh = await call("GET", `groups/${encodeURIComponent(id)}/source`);
        storePositions(fresh.path, positions);
        setEditing({ doc: clone(fresh.document), original: clone(fresh.document), path: fresh.path,
                     sha256: fresh.sha256, id, writable: fresh.writable, saved: !fresh.draft,
                     draft: fresh.draft, notice });
      } catch {
        setEditing({ ...editing, doc, original: clone(doc), path, sha256: result.sha256, saved: true, notice });
      }
    } catch (exc) { setMessage(`Not saved: ${exc.message}`); setPreview(null); }
  };

  const runPlan = async (values) => {
    setMessage(null);  // a refusal of the last try no longer holds
    try {
      setPlan({ ...(await call("POST", `groups/${encodeURIComponent(doc.id)}/plan`, values)), effects: effectsOf() });
    } catch (exc) { setMessage(`Cannot plan: ${exc.message}`); }
  };

  const effectsOf = () => {
    const out = {};
    for (const step of stepsOf(editing.original || doc)) {
      const target = step.skill ? skills[step.skill] : step.group ? groups[step.group] : null;
      const found = !target ? [] : Array.isArray(target.effects) ? target.effects : Object.keys(target.effects || {});
      for (const effect of found) if (effect !== "none") (out[effect] = out[effect] || []).push(step.id);
    }
    return out;
  };

  const run = async (values, confirmed) => {
    setConfirm(null);
    setStates({});
    try {
      const body = { ...values, confirm: !!confirmed };
      setMessage("Running…");
      const record = await streamRun(doc.id, body, (kind, event) => {
        const step = event.step;
        if (!step || step.includes("/")) return;
        const state = { step_started: "running", step_retrying: "retrying", step_finished: "success",
                        step_skipped: "skipped", step_failed: event.status || "failure" }[kind];
        if (state) setStates((old) => ({ ...old, [step]: [...(old[step] || []), state] }));
      });
      setMessage(record ? `Run ${record.id}: ${record.status}` : "Run ended");
      if (record) setPlan({ outputs: record.outputs, steps: record.steps, run: true });
    } catch (exc) {
      if (exc instanceof ApiError && exc.code === "needs_confirmation") {
        setConfirm({ effects: exc.details.effects || exc.details, values });
        setMessage(null);
      } else setMessage(`Run failed: ${exc.message}`);
    }
  };

  const selectedStep = steps.find((s) => String(s.id) === selected);
  const selectedSource = sources.find((s) => s.id === selected);
  const groupDiagnostics = ((check && check.diagnostics) || []).filter((d) => !d.step_id);
  const ctx = { skills, groups, sources };
  const errorCount = check ? check.errors || 0 : 0;

  return (
    <EditorContext.Provider value={ctx}>
      <div className="editor">
        <Palette skills={skills} groups={groups} onAdd={addStep} />
        <section className="canvas-column" aria-label="Canvas">
          <div className="toolbar" role="toolbar" aria-label="Group actions">
            <label htmlFor="file-path">File name</label>
            <input id="file-path" value={path} disabled={!isNew}
                   onChange={(e) => { setPath(e.target.value); setPathTouched(true); }} />
            <span className={`status ${check ? (check.valid ? "valid" : "errors") : ""}`} data-testid="check-status">
              {check ? (check.failed ? "cannot check" : check.valid ? "valid" : plural(errorCount, "problem")) : "checking…"}
            </span>
            <button type="button" onClick={undo} disabled={!hist.past.length} aria-keyshortcuts="Control+Z" title="Undo (Ctrl+Z)">Undo</button>
            <button type="button" onClick={redo} disabled={!hist.future.length} aria-keyshortcuts="Control+Shift+Z" title="Redo (Ctrl+Shift+Z)">Redo</button>
            <button type="button" onClick={autoLayout} disabled={!nodes.length}>Auto-layout</button>
            <button type="button" onClick={() => save(false)} disabled={!editing.writable}>Save…</button>
            {dirty && <span className="muted" data-testid="unsaved">unsaved changes</span>}
            {editing.draft && (
              <button type="button" onClick={() => approve(editing.id)} disabled={!(check && check.valid) || diffEdits(editing.original, doc).length > 0}
                      title="Save your changes first; a draft that passes the check becomes an ordinary group">Approve draft</button>
            )}
          </div>
          {message && <p className="banner" role="status" data-testid="message">{message}</p>}
          <ConnectionHint />
          <div className="canvas" ref={canvasRef} onDragOver={(e) => { e.preventDefault(); e.dataTransfer.dropEffect = "copy"; }}
               onDrop={onDrop} data-testid="canvas">
            {nodes.length === 0 && (
              <div className="empty-hint" data-testid="empty-hint">
                <p><strong>Start here.</strong> Drag a skill from the list on the left onto this canvas (or press its <kbd>+</kbd>) to add the first step.</p>
                <p>Add the group&apos;s inputs in the panel on the right: each appears here as a node whose output you drag onto a step&apos;s input.</p>
              </div>
            )}
            <ReactFlow nodes={nodes} edges={edges} nodeTypes={nodeTypes} onConnect={connect}
                       isValidConnection={isValidConnection}
                       onNodesChange={(changes) => {
                         const chosen = changes.find((c) => c.type === "select" && c.selected);
                         if (chosen) setSelected(chosen.id);
                         const sized = changes.filter((c) => c.type === "dimensions" && c.dimensions);
                         if (sized.length) setMeasured((old) => {
                           const next = { ...old };
                           for (const c of sized) next[c.id] = c.dimensions;
                           return next;
                         });
                         const moved = changes.filter((c) => c.type === "position" && c.position);
                         if (moved.length) {
                           const move = (p) => {
                             const next = { ...p.positions };
                             for (const c of moved) next[c.id] = c.position;
                             return { ...p, positions: next };
                           };
                           if (dragStart.current) setHist((h) => ({ ...h, present: move(h.present) }));
                           else commit(move, `move:${moved[0].id}`); // moved with the arrow keys
                         }
                       }}
                       onNodeDragStart={() => { dragStart.current = hist.present; }}
                       onNodeDragStop={() => {
                         const before = dragStart.current;
                         dragStart.current = null;
                         setHist((h) => (h.present === before ? h : { ...h, past: [...h.past, before], future: [], key: null }));
                       }}
                       onDelete={(gone) => { remove(gone); setSelectedEdges([]); }}
                       onEdgesChange={(changes) => setSelectedEdges((old) => {
                         let next = old;
                         for (const c of changes.filter((x) => x.type === "select")) {
                           next = c.selected ? [...next.filter((id) => id !== c.id), c.id] : next.filter((id) => id !== c.id);
                         }
                         return next;
                       })}
                       onNodeClick={(_, node) => setSelected(node.id)} onPaneClick={() => setSelected(null)}
                       onInit={(instance) => { if (hadNodes.current) setTimeout(() => readableView(instance, canvasRef.current), 80); }}
                       minZoom={0.3} maxZoom={2} proOptions={{ hideAttribution: true }}
                       deleteKeyCode={["Delete", "Backspace"]} aria-label="Group canvas">
              <Background gap={16} />
              <Controls showInteractive={false} />
            </ReactFlow>
          </div>
          <Diagnostics items={groupDiagnostics} failed={check && check.failed} />
        </section>
        <aside className="panel" aria-label="Properties">
          {selectedStep ? (
            <StepPanel key={selectedStep.id} step={selectedStep} diagnostics={byStep[selectedStep.id] || []}
              sources={sources}
              upstream={steps.filter((s) => s.id !== selectedStep.id && !downstreamOf(doc, String(selectedStep.id)).has(String(s.id)))}
              onConnect={(from, output, input) => connect({ source: from, sourceHandle: `out:${output}`, target: String(selectedStep.id), targetHandle: `in:${input}` })}
              onChange={(change, key) => update((d) => {
                const index = stepsOf(d).findIndex((s) => s.id === selectedStep.id);
                const step = d.steps.filter(isObject)[index];
                if (step) change(step);
              }, key)}
              onRemove={() => remove({ nodes: [{ id: String(selectedStep.id) }] })}
              onRename={(to) => {
                const from = String(selectedStep.id);
                if (!/^[A-Za-z0-9_-]+$/.test(to)) return "use letters, digits, - and _ only";
                if (to !== from && steps.some((s) => String(s.id) === to)) return `there is a step ${to} already`;
                if (to === from) return null;
                commit((p) => {
                  const positions = { ...p.positions, [to]: p.positions[from] };
                  delete positions[from];
                  return { ...p, doc: renameStep(p.doc, from, to), positions };
                });
                setSelected(to);
                return null;
              }}
              onOpenGroup={openGroup} />
          ) : selectedSource ? (
            <SourcePanel source={selectedSource} update={update}
                         readers={steps.filter((st) => referencesIn([st.with, st.if]).some((r) => r.kind === selectedSource.kind && r.name === selectedSource.name)).map((st) => String(st.id))}
                         onRemove={() => remove({ nodes: [{ id: selectedSource.id }] })} />
          ) : (
            <GroupPanel doc={doc} update={update} isNew={isNew}
                        contextNames={sources.filter((s) => s.kind === "context").map((s) => s.name)}
                        onAddContext={(name) => commit((p) => ({ ...p, context: [...p.context.filter((n) => n !== name), name] }))} />
          )}
          <RunPanel group={editing.original || doc} saved={editing.saved} onPlan={runPlan} onRun={(values) => run(values, false)}
                    plan={plan} contextNames={contextNames(editing.original || doc)} />
        </aside>
      </div>
      {preview && (
        <Dialog title={`Save ${preview.path}`} onClose={() => setPreview(null)}>
          <p>{preview.changed ? (preview.created ? "A new file:" : "These lines change:") : "Nothing changes."}
            {!preview.valid && ` The group still has ${plural(preview.errors, "problem")} to fix; you can save it now and fix ${preview.errors === 1 ? "it" : "them"} later.`}</p>
          <pre className="diff" data-testid="diff">{preview.diff.split("\n").map((line, i) => (
            <span key={i} className={line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : ""}>{line}{"\n"}</span>
          ))}</pre>
          <div className="row">
            <button type="button" onClick={() => save(true)} disabled={!preview.changed}>Write file</button>
            <button type="button" onClick={() => setPreview(null)}>Cancel</button>
          </div>
        </Dialog>
      )}
      {confirm && (
        <Dialog title="This run has side effects" onClose={() => setConfirm(null)}>
          <p>Running it changes things outside its run folder:</p>
          <ul data-testid="confirm-effects">{Object.entries(confirm.effects).map(([effect, names]) => {
            const steps = effectsOf()[effect];
            return (
              <li key={effect}>{steps ? `step ${steps.join(", ")}` : "it"} <strong>{EFFECTS[effect] || effect}</strong>
                {" "}(skill {Array.isArray(names) ? names.join(", ") : String(names)})</li>
            );
          })}</ul>
          <div className="row">
            <button type="button" onClick={() => run(confirm.values, true)}>Run anyway</button>
            <button type="button" onClick={() => setConfirm(null)}>Cancel</button>
          </div>
        </Dialog>
      )}
    </EditorContext.Provider>
  );
}

// A group input or context value chosen on the canvas: what it is, and its removal.
function SourcePanel({ source, update, readers, onRemove }) {
  const spec = source.spec || {};
  const describe = (value) => update((d) => {
    const inputs = isObject(d.inputs) ? d.inputs : {};
    const old = isObject(inputs[source.name]) ? inputs[source.name] : { type: inputs[source.name] };
    const next = { ...old };
    if (value) next.description = value; else delete next.description;
    inputs[source.name] = next;
  }, `describe:${source.id}`);
  return (
    <section aria-labelledby="source-title">
      <h2 id="source-title">{source.kind === "inputs" ? "Group input" : "Context value"} {source.name}</h2>
      <p className="muted">{source.kind === "inputs"
        ? `${source.type || "any type"}${source.required ? ", required" : ""}${spec.default !== undefined ? `, default ${JSON.stringify(spec.default)}` : ""}. Whoever runs the group gives it; drag its handle onto a step's input to use it.`
        : `${source.type || "any type"}. A value from the caller's context (e.g. the team's address), read with context.${source.name}.`}</p>
      {source.kind === "inputs" && (
        <div className="field"><label htmlFor="source-description">description</label>
          <input id="source-description" value={spec.description || ""} onChange={(e) => describe(e.target.value)} /></div>
      )}
      <p data-testid="source-readers">{readers.length ? `Read by ${readers.join(", ")}.` : "No step reads it yet."}</p>
      {source.kind === "context" && readers.length > 0 ? (
        <p className="muted">To remove it, disconnect it from those steps first.</p>
      ) : (
        <button type="button" className="danger" onClick={onRemove}>Remove {source.kind === "inputs" ? "input" : "context value"}</button>
      )}
    </section>
  );
}

function ConnectionHint() {
  const connection = useConnection();
  const { skills, groups } = useContext(EditorContext);
  if (!connection.inProgress || !connection.fromHandle) return <p className="hint-line" aria-live="polite"> </p>;
  const fromNode = connection.fromNode;
  const output = (connection.fromHandle.id || "").replace(/^out:/, "");
  const { label, type: outType } = describeOutput(fromNode, output, skills, groups);
  let text = `Connecting ${label}${outType ? ` (${outType})` : ""}: drop it on an input`;
  let bad = false;
  if (connection.toHandle && connection.toNode && connection.toNode.data.step) {
    const to = connection.toNode.data.step;
    const input = (connection.toHandle.id || "").replace(/^in:/, "");
    const inType = typeName(contract(to, skills, groups).inputs[input]);
    const shortName = label.split(".").at(-1);
    bad = !compatible(outType, inType) && !(inType === "array" && outType);
    text = bad ? `Type mismatch: ${shortName} is ${outType}, ${to.id}.${input} expects ${inType}`
      : `${label} → ${to.id}.${input}${inType ? ` (${inType}${inType === "array" && outType !== "array" ? ", a list of one" : ""})` : ""}`;
  }
  return <p className={`hint-line${bad ? " mismatch" : ""}`} aria-live="polite" data-testid="connection-hint">{text}</p>;
}

function describeOutput(node, output, skills, groups) {
  if (!node) return { label: "?", type: null };
  if (node.data.source) return { label: node.id, type: node.data.source.type };
  const step = node.data.step;
  return { label: `${step.id}.${output}`, type: typeName(contract(step, skills, groups).outputs[output]) };
}

function draggedType(connection, skills, groups, selfId) {
  if (!connection.inProgress || !connection.fromNode || connection.fromNode.id === selfId) return null;
  const output = ((connection.fromHandle && connection.fromHandle.id) || "").replace(/^out:/, "");
  return describeOutput(connection.fromNode, output, skills, groups).type;
}

function SourceNode({ data }) {
  const { source } = data;
  return (
    <div className={`source-node ${source.kind}`} data-testid={`node-${source.id}`}>
      <div className="source-kind">{source.kind === "inputs" ? "Group input" : "Context value"}</div>
      <div className="step-title"><strong>{source.name}</strong>{source.required ? <span className="muted">required</span> : null}</div>
      <div className="handles bottom">
        <div className="port out" title={`${source.id}: ${source.type || "any"}`}>
          <span>{source.type || "any"}</span>
          <Handle type="source" position={Position.Bottom} id="out:value" data-testid={`out-${source.id}`} />
        </div>
      </div>
    </div>
  );
}

function StepNode({ data }) {
  const { skills, groups } = useContext(EditorContext);
  const connection = useConnection();
  const { step, diagnostics, history } = data;
  const state = history.at(-1);
  const c = contract(step, skills, groups);
  const inputs = Object.keys(c.inputs);
  const outputs = Object.keys(c.outputs);
  const fromType = draggedType(connection, skills, groups, String(step.id)); // unfit inputs turn red
  const errors = diagnostics.filter((d) => d.severity === "error");
  return (
    <div className={`step-node${errors.length ? " invalid" : ""}${state ? ` state-${state}` : ""}`}
         data-testid={`node-${step.id}`} data-status={state || ""} data-history={history.join(" ")} aria-invalid={errors.length > 0}>
      <Handle type="target" position={Position.Top} id="before" className="order-handle" isConnectable={false} />
      <div className="handles top">
        {inputs.map((name) => {
          const t = typeName(c.inputs[name]);
          const bad = fromType && !compatible(fromType, t) && t !== "array";
          return (
            <div key={name} className="port in" title={`${name}: ${t || "any"}`}>
              <Handle type="target" position={Position.Top} id={`in:${name}`} data-testid={`in-${step.id}-${name}`}
                      className={bad ? "mismatch" : ""} />
              <span>{name}{c.required.includes(name) ? "*" : ""}</span>
            </div>
          );
        })}
      </div>
      <div className="step-title"><strong>{step.id}</strong> <span className="target">{step.skill || step.group || "?"}</span>
        {state && <span className={`badge ${state}`} data-testid={`state-${step.id}`}>{state}</span>}</div>
      {step.if && <div className="cond">if {String(step.if)}</div>}
      {errors.length > 0 && (
        <ul className="node-diags" data-testid={`diags-${step.id}`}>
          {errors.map((d, i) => <li key={i} data-rule={d.rule}>{d.message.replace(/^steps\[\d+\]\.?/, "").replace(/^: /, "")}</li>)}
        </ul>
      )}
      <div className="handles bottom">
        {outputs.map((name) => (
          <div key={name} className="port out" title={`${name}: ${typeName(c.outputs[name]) || "any"}`}>
            <span>{name}</span>
            <Handle type="source" position={Position.Bottom} id={`out:${name}`} data-testid={`out-${step.id}-${name}`} />
          </div>
        ))}
      </div>
      <Handle type="source" position={Position.Bottom} id="after" className="order-handle" isConnectable={false} />
    </div>
  );
}
const nodeTypes = { step: StepNode, source: SourceNode };

// Where the checker's hint tells a file's author what to type, the studio says what to do
// on the canvas instead.
const CANVAS_HINTS = {
  "unused-input": "drag the handle of its node on the canvas onto a step's input, or remove it: every caller has to give it",
};

function Diagnostics({ items, failed }) {
  if (!items.length && !failed) return null;
  return (
    <section className="diagnostics" aria-label="Group diagnostics" data-testid="group-diagnostics">
      {failed && <p className="error">{failed}</p>}
      <ul>{items.map((d, i) => (
        <li key={i} className={d.severity} data-rule={d.rule}>{d.line ? `${d.line}:${d.column || 1} ` : ""}{d.message}{CANVAS_HINTS[d.rule] || d.hint ? ` — ${CANVAS_HINTS[d.rule] || d.hint}` : ""} <code>[{d.rule}]</code></li>
      ))}</ul>
    </section>
  );
}
