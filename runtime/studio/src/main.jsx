// skillgrove studio: see the library, build and edit groups on a canvas, check, save, plan and
// run them. Everything shown comes from the public HTTP API and is rendered as text by React
// (never as HTML), so what skills and runs say cannot run in the page.
import { StrictMode, createContext, useCallback, useContext, useEffect, useMemo, useRef, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  Background, Controls, Handle, MarkerType, Position, ReactFlow, ReactFlowProvider,
  useConnection, useReactFlow,
} from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import "./styles.css";
import { ApiError, call, setToken, streamRun, takeTokenFromAddress } from "./api.js";
import {
  clone, compatible, contract, diffEdits, isObject, layout, needsOf, newStepId,
  nodeWidth, reference, stepsOf, typeName,
} from "./model.js";

const Studio = createContext(null);
const TYPES = ["string", "integer", "number", "boolean", "array", "object"];

function App() {
  const [view, setView] = useState("library");
  const [skills, setSkills] = useState({});
  const [groups, setGroups] = useState([]);
  const [drafts, setDrafts] = useState([]);
  const [needToken, setNeedToken] = useState(false);
  const [error, setError] = useState(null);
  const [editing, setEditing] = useState(null); // {doc, original, path, sha256, id}

  const load = useCallback(async () => {
    try {
      const [s, g, d] = await Promise.all([call("GET", "skills"), call("GET", "groups"), call("GET", "drafts")]);
      setDrafts(d.drafts);
      const byName = {};
      for (const skill of s.skills) byName[skill.name] = skill;
      setSkills(byName);
      setGroups(g.groups);
      setNeedToken(false);
      setError(null);
    } catch (exc) {
      if (exc instanceof ApiError && exc.status === 401) setNeedToken(true);
      else setError(exc.message);
    }
  }, []);
  useEffect(() => { load(); }, [load]);

  const openGroup = useCallback(async (id, notice = null) => {
    try {
      const source = await call("GET", `groups/${encodeURIComponent(id)}/source`);
      setEditing({ doc: clone(source.document), original: clone(source.document), path: source.path,
                   sha256: source.sha256, id, writable: source.writable, saved: !source.draft,
                   draft: source.draft, notice });
      setView("editor");
    } catch (exc) { setError(exc.message); }
  }, []);

  const approve = useCallback(async (id) => {
    try {
      const result = await call("POST", `drafts/${encodeURIComponent(id)}/approve`, {});
      await load();
      await openGroup(id, `Approved: ${result.path} is an ordinary group now`);
    } catch (exc) { setError(`Not approved: ${exc.message}`); }
  }, [load, openGroup]);

  const discard = useCallback(async (id) => {
    try { await call("DELETE", `drafts/${encodeURIComponent(id)}`); await load(); setView("library"); }
    catch (exc) { setError(`Not discarded: ${exc.message}`); }
  }, [load]);

  const newGroup = useCallback(() => {
    setEditing({ doc: { id: "new-group", name: "New group", description: "", steps: [] },
                 original: null, path: "new-group.yaml", sha256: null, id: null, writable: true,
                 saved: false });
    setView("editor");
  }, []);

  const groupsById = useMemo(() => {
    const out = {};
    for (const g of groups) if (g.id) out[g.id] = g;
    return out;
  }, [groups]);

  return (
    <Studio.Provider value={{ skills, groups: groupsById, reload: load, openGroup, approve, discard }}>
      <header className="app-header">
        <h1>skillgrove studio</h1>
        <nav aria-label="Views">
          <button type="button" aria-pressed={view === "library"} onClick={() => setView("library")}>Library</button>
          <button type="button" aria-pressed={view === "editor"} disabled={!editing} onClick={() => setView("editor")}>Editor</button>
          <button type="button" onClick={newGroup}>New group</button>
        </nav>
      </header>
      {needToken && <TokenForm onDone={load} />}
      {error && <p className="banner error" role="alert">{error}</p>}
      <main>
        {view === "library" && <Library groups={groups} drafts={drafts} skills={skills} onOpen={openGroup}
                                         onApprove={approve} onDiscard={discard} />}
        {view === "editor" && editing && (
          <ReactFlowProvider>
            <Editor key={editing.path + (editing.sha256 || "")} editing={editing} setEditing={setEditing} />
          </ReactFlowProvider>
        )}
      </main>
    </Studio.Provider>
  );
}

function TokenForm({ onDone }) {
  const [value, setValue] = useState("");
  return (
    <form className="banner" onSubmit={(e) => { e.preventDefault(); setToken(value); onDone(); }}>
      <label htmlFor="token">This server needs its API token</label>
      <input id="token" type="password" autoComplete="off" value={value} onChange={(e) => setValue(e.target.value)} />
      <button type="submit">Sign in</button>
    </form>
  );
}

// -- library ----------------------------------------------------------------------------------

function Library({ groups, drafts, skills, onOpen, onApprove, onDiscard }) {
  const [discarding, setDiscarding] = useState(null);
  const [impact, setImpact] = useState({}); // skill name -> its impact, once asked
  const showImpact = async (name) => {
    try { const found = await call("GET", `skills/${encodeURIComponent(name)}/impact`); setImpact((old) => ({ ...old, [name]: found })); }
    catch (exc) { setImpact((old) => ({ ...old, [name]: { failed: exc.message } })); }
  };
  const [request, setRequest] = useState("");
  const [toolbox, setToolbox] = useState(null);
  const [searchError, setSearchError] = useState(null);
  const search = async (e) => {
    e.preventDefault();
    if (!request.trim()) return;
    try { setToolbox(await call("POST", "search", { request })); setSearchError(null); }
    catch (exc) { setSearchError(exc.message); }
  };
  return (
    <div className="library">
      <section aria-labelledby="search-title" className="card">
        <h2 id="search-title">Which group would an agent get?</h2>
        <form onSubmit={search} className="row">
          <label htmlFor="search" className="sr-only">Request</label>
          <input id="search" type="search" placeholder="e.g. summarize the quarterly report PDF and email it"
                 value={request} onChange={(e) => setRequest(e.target.value)} />
          <button type="submit">Search</button>
        </form>
        {searchError && <p className="error" role="alert">{searchError}</p>}
        {toolbox && (
          <div className="result" data-testid="search-result">
            {toolbox.shape === "group" && toolbox.group ? (
              <p>Group <strong>{toolbox.group.id}</strong>: {toolbox.group.description}{" "}
                <button type="button" onClick={() => onOpen(toolbox.group.id)}>Open {toolbox.group.id}</button></p>
            ) : (
              <p>No group fits ({toolbox.fallback_reason || toolbox.shape}); single skills:{" "}
                {toolbox.skills.map((s) => s.name).join(", ") || "none"}</p>
            )}
          </div>
        )}
      </section>
      <section aria-labelledby="groups-title" className="card">
        <h2 id="groups-title">Groups</h2>
        <table>
          <thead><tr><th scope="col">Group</th><th scope="col">Status</th><th scope="col">Steps</th><th scope="col">Description</th></tr></thead>
          <tbody>
            {groups.filter((g) => g.status !== "draft").map((g) => (
              <tr key={g.location}>
                <td>{g.id ? <button type="button" className="link" onClick={() => onOpen(g.id)}>{g.id}</button> : g.location}</td>
                <td><span className={`status ${g.status}`}>{g.status}</span>
                  {g.errors && g.errors.length > 0 && <details><summary>{g.errors.length} errors</summary><pre>{g.errors.join("\n")}</pre></details>}</td>
                <td>{g.steps ? g.steps.length : ""}</td>
                <td>{g.description || ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
      {drafts.length > 0 && (
        <section aria-labelledby="drafts-title" className="card">
          <h2 id="drafts-title">Drafts to review</h2>
          <table>
            <thead><tr><th scope="col">Draft</th><th scope="col">Check</th><th scope="col">Steps</th><th scope="col">Description</th><th scope="col">Review</th></tr></thead>
            <tbody>
              {drafts.map((d) => (
                <tr key={d.path} data-testid={`draft-${d.id}`}>
                  <td>{d.id}<br /><span className="muted">{d.path}</span></td>
                  <td><span className={`status ${d.valid ? "valid" : "errors"}`}>{d.valid ? "passes" : `${d.errors} errors`}</span></td>
                  <td>{d.members.join(" → ")}</td>
                  <td>{d.description || ""}</td>
                  <td><div className="row">
                    <button type="button" onClick={() => onOpen(d.id)} aria-label={`Edit draft ${d.id}`}>Edit</button>
                    <button type="button" onClick={() => onApprove(d.id)} disabled={!d.valid} aria-label={`Approve draft ${d.id}`}>Approve</button>
                    <button type="button" onClick={() => setDiscarding(d.id)} aria-label={`Discard draft ${d.id}`}>Discard</button>
                  </div></td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      {discarding && (
        <Dialog title={`Discard draft ${discarding}?`} onClose={() => setDiscarding(null)}>
          <p>Its file is deleted.</p>
          <div className="row">
            <button type="button" onClick={() => { onDiscard(discarding); setDiscarding(null); }}>Discard it</button>
            <button type="button" onClick={() => setDiscarding(null)}>Keep it</button>
          </div>
        </Dialog>
      )}
      <section aria-labelledby="skills-title" className="card">
        <h2 id="skills-title">Skills</h2>
        <table>
          <thead><tr><th scope="col">Skill</th><th scope="col">Inputs</th><th scope="col">Outputs</th><th scope="col">Runs here</th><th scope="col">Description</th><th scope="col">Used by</th></tr></thead>
          <tbody>
            {Object.values(skills).map((s) => (
              <tr key={s.id}>
                <td>{s.name}</td>
                <td>{Object.keys((s.input_schema && s.input_schema.properties) || {}).join(", ")}</td>
                <td>{Object.keys((s.output_schema && s.output_schema.properties) || {}).join(", ")}</td>
                <td>{!s.runnable ? "instructions only" : s.available ? "yes" : `no: ${s.unavailable_reasons.join("; ")}`}</td>
                <td>{s.description}</td>
                <td className="used-by" data-testid={`impact-${s.name}`}>{impact[s.name] ? <ImpactText impact={impact[s.name]} onOpen={onOpen} /> : (
                  <button type="button" onClick={() => showImpact(s.name)} aria-label={`Which groups use ${s.name}?`}>Show</button>)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </div>
  );
}

function ImpactText({ impact, onOpen }) {
  if (impact.failed) return <span className="error">{impact.failed}</span>;
  if (!impact.uses.length) return <span className="muted">no group</span>;
  return (
    <ul className="impact">{impact.uses.map((u) => (
      <li key={u.group}><button type="button" className="link" onClick={() => onOpen(u.group)}>{u.group}</button>
        {u.via.length ? ` via ${u.via.join(" → ")}` : ""}{u.draft ? " (draft)" : ""}
        {u.breaks && <span className="error"> — breaks: {u.problems.map((p) => p.message).join("; ")}</span>}</li>
    ))}</ul>
  );
}

// -- editor -----------------------------------------------------------------------------------

function Editor({ editing, setEditing }) {
  const { skills, groups, reload, openGroup, approve } = useContext(Studio);
  const [doc, setDoc] = useState(editing.doc);
  const [path, setPath] = useState(editing.path);
  const [selected, setSelected] = useState(null);
  const [check, setCheck] = useState(null);
  const [preview, setPreview] = useState(null);
  const [message, setMessage] = useState(editing.notice || null);
  const [states, setStates] = useState({});
  const [confirm, setConfirm] = useState(null);
  const [runInputs, setRunInputs] = useState("{}");
  const [runContext, setRunContext] = useState("{}");
  const [plan, setPlan] = useState(null);
  const [dragging, setDragging] = useState(null);
  const [measured, setMeasured] = useState({}); // node id -> the size React Flow measured
  const flow = useReactFlow();
  const wrapper = useRef(null);
  const isNew = editing.original === null;

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

  const update = (change) => setDoc((old) => { const next = clone(old); change(next); return next; });
  const stepIndex = (id) => stepsOf(doc).findIndex((s) => s.id === id);

  const addStep = (kind, name, at) => {
    const id = newStepId(doc, name);
    update((d) => { d.steps = Array.isArray(d.steps) ? d.steps : []; d.steps.push({ id, [kind]: name }); });
    setSelected(id);
    if (at) setMessage(`Added step ${id}`);
  };

  const onDrop = (e) => {
    e.preventDefault();
    const name = e.dataTransfer.getData("application/x-skillgrove-skill");
    if (name) addStep("skill", name, true);
  };

  const connect = ({ source: from, sourceHandle, target, targetHandle }) => {
    if (!from || !target || from === target) return;
    const output = (sourceHandle || "").replace(/^out:/, "");
    const input = (targetHandle || "").replace(/^in:/, "");
    if (!output || !input) return;
    update((d) => {
      const step = d.steps.find((s) => s.id === target);
      if (!step) return;
      step.with = isObject(step.with) ? step.with : {};
      step.with[input] = reference(from, output);
      const needs = needsOf(step);
      if (!needs.includes(from)) step.needs = [...needs, from];
    });
    setSelected(target);
  };

  const widthOf = useCallback((step) => {
    const c = contract(step, skills, groups);
    return nodeWidth(Math.max(Object.keys(c.inputs).length, Object.keys(c.outputs).length));
  }, [skills, groups]);
  const positions = useMemo(() => layout(doc, widthOf), [doc, widthOf]);
  const nodes = stepsOf(doc).map((step) => ({
    id: String(step.id), type: "step", position: positions[step.id] || { x: 0, y: 0 },
    data: { step, diagnostics: byStep[step.id] || [], history: states[step.id] || [] }, selected: selected === step.id,
    style: { width: widthOf(step) }, measured: measured[step.id],
  }));
  const ids = new Set(nodes.map((n) => n.id));
  // A value that is one output of an upstream step is drawn from that output to the input;
  // a need that passes no value, from step to step.
  const edges = stepsOf(doc).flatMap((step) => {
    const running = (states[step.id] || []).at(-1) === "running";
    const c = contract(step, skills, groups);
    const fed = new Set();
    const out = [];
    for (const [input, value] of Object.entries(isObject(step.with) ? step.with : {})) {
      const match = typeof value === "string" && /^\$\{\{\s*steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)\s*\}\}$/.exec(value);
      if (!match || !ids.has(match[1]) || !(input in c.inputs)) continue;
      const from = stepsOf(doc).find((s) => s.id === match[1]);
      if (!(match[2] in contract(from, skills, groups).outputs)) continue;
      fed.add(match[1]);
      out.push({ id: `${match[1]}.${match[2]}->${step.id}.${input}`, source: match[1], target: String(step.id),
                 sourceHandle: `out:${match[2]}`, targetHandle: `in:${input}`, animated: running,
                 markerEnd: { type: MarkerType.ArrowClosed } });
    }
    for (const need of needsOf(step).filter((n) => ids.has(n) && !fed.has(n))) {
      out.push({ id: `${need}->${step.id}`, source: need, target: String(step.id), sourceHandle: "after",
                 targetHandle: "before", markerEnd: { type: MarkerType.ArrowClosed }, animated: running,
                 style: { strokeDasharray: "4 3" } });
    }
    return out;
  });

  const sizedCount = Object.keys(measured).length;
  useEffect(() => {
    const t = setTimeout(() => flow.fitView({ padding: 0.15, maxZoom: 1.2 }), 150);
    return () => clearTimeout(t);
  }, [nodes.length, sizedCount, flow]);

  const save = async (write) => {
    try {
      const body = { ...source(), path, dry_run: !write };
      if (!isNew && editing.sha256) body.base_sha256 = editing.sha256;
      const result = await call("POST", "groups/files", body);
      if (!write) { setPreview(result); return; }
      setPreview(null);
      const notice = `Saved ${result.path}${result.valid ? "" : ` (${result.errors} errors remain)`}`;
      setMessage(notice);
      await reload();
      const id = result.id || doc.id;
      try {
        const fresh = await call("GET", `groups/${encodeURIComponent(id)}/source`);
        setEditing({ doc: clone(fresh.document), original: clone(fresh.document), path: fresh.path,
                     sha256: fresh.sha256, id, writable: fresh.writable, saved: !fresh.draft,
                     draft: fresh.draft, notice });
      } catch {
        setEditing({ ...editing, doc, original: clone(doc), path, sha256: result.sha256, saved: true, notice });
      }
    } catch (exc) { setMessage(`Not saved: ${exc.message}`); setPreview(null); }
  };

  const parse = (text, what) => {
    try { const v = JSON.parse(text || "{}"); if (isObject(v)) return v; } catch { /* below */ }
    throw new Error(`${what} must be a JSON object`);
  };

  const runPlan = async () => {
    try {
      setPlan(await call("POST", `groups/${encodeURIComponent(doc.id)}/plan`,
        { inputs: parse(runInputs, "Inputs"), context: parse(runContext, "Context") }));
    } catch (exc) { setMessage(`Cannot plan: ${exc.message}`); }
  };

  const run = async (confirmed) => {
    setConfirm(null);
    setStates({});
    try {
      const body = { inputs: parse(runInputs, "Inputs"), context: parse(runContext, "Context"), confirm: !!confirmed };
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
        setConfirm(exc.details.effects || exc.details);
        setMessage(null);
      } else setMessage(`Run failed: ${exc.message}`);
    }
  };

  const selectedStep = stepsOf(doc).find((s) => s.id === selected);
  const groupDiagnostics = ((check && check.diagnostics) || []).filter((d) => !d.step_id);
  const ctx = { dragging, setDragging, skills, groups };

  return (
    <DragContext.Provider value={ctx}>
      <div className="editor">
        <Palette skills={skills} groups={groups} onAdd={addStep} />
        <section className="canvas-column" aria-label="Canvas">
          <div className="toolbar" role="toolbar" aria-label="Group actions">
            <label htmlFor="file-path">File name</label>
            <input id="file-path" value={path} disabled={!isNew} onChange={(e) => setPath(e.target.value)} />
            <span className={`status ${check ? (check.valid ? "valid" : "errors") : ""}`} data-testid="check-status">
              {check ? (check.failed ? "cannot check" : check.valid ? "valid" : `${check.errors} error${check.errors === 1 ? "" : "s"}`) : "checking…"}
            </span>
            <button type="button" onClick={() => save(false)} disabled={!editing.writable}>Save…</button>
            {editing.draft && (
              <button type="button" onClick={() => approve(editing.id)} disabled={!(check && check.valid) || diffEdits(editing.original, doc).length > 0}
                      title="Save your changes first; a draft that passes the check becomes an ordinary group">Approve draft</button>
            )}
            <button type="button" onClick={runPlan} disabled={!editing.saved}>Plan</button>
            <button type="button" onClick={() => run(false)} disabled={!editing.saved}>Run</button>
          </div>
          {message && <p className="banner" role="status" data-testid="message">{message}</p>}
          <ConnectionHint />
          <div className="canvas" ref={wrapper} onDragOver={(e) => { e.preventDefault(); e.dataTransfer.dropEffect = "copy"; }}
               onDrop={onDrop} data-testid="canvas">
            <ReactFlow nodes={nodes} edges={edges} nodeTypes={nodeTypes} onConnect={connect}
                       onNodesChange={(changes) => {
                         // a node chosen with the keyboard (Tab to it, Enter) is selected too
                         const chosen = changes.find((c) => c.type === "select" && c.selected);
                         if (chosen) setSelected(chosen.id);
                         const sized = changes.filter((c) => c.type === "dimensions" && c.dimensions);
                         if (sized.length) setMeasured((old) => {
                           const next = { ...old };
                           for (const c of sized) next[c.id] = c.dimensions;
                           return next;
                         });
                       }}
                       onNodeClick={(_, node) => setSelected(node.id)} onPaneClick={() => setSelected(null)}
                       onConnectStart={(_, p) => setDragging(p)} onConnectEnd={() => setDragging(null)}
                       nodesDraggable={false} fitView minZoom={0.3} proOptions={{ hideAttribution: true }}
                       deleteKeyCode={null} aria-label="Group canvas">
              <Background gap={16} />
              <Controls showInteractive={false} />
            </ReactFlow>
          </div>
          <Diagnostics items={groupDiagnostics} failed={check && check.failed} />
        </section>
        <aside className="panel" aria-label="Properties">
          {selectedStep ? (
            <StepPanel key={selectedStep.id} step={selectedStep} diagnostics={byStep[selectedStep.id] || []}
              upstream={stepsOf(doc).filter((s) => s.id !== selectedStep.id)}
              onConnect={(from, output, input) => connect({ source: from, sourceHandle: `out:${output}`, target: selectedStep.id, targetHandle: `in:${input}` })}
              onChange={(change) => update((d) => change(d.steps[stepIndex(selectedStep.id)]))}
              onRemove={() => { update((d) => {
                d.steps = d.steps.filter((s) => s.id !== selectedStep.id);
                for (const s of d.steps) if (needsOf(s).includes(selectedStep.id)) s.needs = needsOf(s).filter((n) => n !== selectedStep.id);
              }); setSelected(null); }}
              onOpenGroup={openGroup} />
          ) : (
            <GroupPanel doc={doc} update={update} isNew={isNew} />
          )}
          <RunPanel inputs={runInputs} setInputs={setRunInputs} context={runContext} setContext={setRunContext} plan={plan} />
        </aside>
      </div>
      {preview && (
        <Dialog title={`Save ${preview.path}`} onClose={() => setPreview(null)}>
          <p>{preview.changed ? (preview.created ? "A new file:" : "These lines change:") : "Nothing changes."}
            {!preview.valid && ` It still has ${preview.errors} errors.`}</p>
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
          <ul>{Object.entries(confirm).map(([effect, names]) => (
            <li key={effect}><strong>{effect}</strong>: {Array.isArray(names) ? names.join(", ") : String(names)}</li>
          ))}</ul>
          <div className="row">
            <button type="button" onClick={() => run(true)}>Run anyway</button>
            <button type="button" onClick={() => setConfirm(null)}>Cancel</button>
          </div>
        </Dialog>
      )}
    </DragContext.Provider>
  );
}

const DragContext = createContext(null);

function ConnectionHint() {
  const connection = useConnection();
  const { skills, groups } = useContext(DragContext);
  if (!connection.inProgress || !connection.fromHandle) return <p className="hint-line" aria-live="polite"> </p>;
  const flowNodes = connection.fromNode;
  const from = flowNodes && flowNodes.data.step;
  const output = (connection.fromHandle.id || "").replace(/^out:/, "");
  const outType = from ? typeName(contract(from, skills, groups).outputs[output]) : null;
  let text = `Connecting ${from ? from.id : "?"}.${output}${outType ? ` (${outType})` : ""}: drop it on an input`;
  let bad = false;
  if (connection.toHandle && connection.toNode) {
    const to = connection.toNode.data.step;
    const input = (connection.toHandle.id || "").replace(/^in:/, "");
    const inType = typeName(contract(to, skills, groups).inputs[input]);
    bad = !compatible(outType, inType);
    text = bad ? `Type mismatch: ${output} is ${outType}, ${to.id}.${input} expects ${inType}`
      : `${output} → ${to.id}.${input}${inType ? ` (${inType})` : ""}`;
  }
  return <p className={`hint-line${bad ? " mismatch" : ""}`} aria-live="polite" data-testid="connection-hint">{text}</p>;
}

function StepNode({ data }) {
  const { skills, groups } = useContext(DragContext);
  const connection = useConnection();
  const { step, diagnostics, history } = data;
  const state = history.at(-1);
  const c = contract(step, skills, groups);
  const inputs = Object.keys(c.inputs);
  const outputs = Object.keys(c.outputs);
  let fromType = null; // while an output is dragged, the inputs it does not fit turn red
  if (connection.inProgress && connection.fromNode && connection.fromNode.id !== step.id) {
    const from = connection.fromNode.data.step;
    const output = ((connection.fromHandle && connection.fromHandle.id) || "").replace(/^out:/, "");
    fromType = typeName(contract(from, skills, groups).outputs[output]);
  }
  const errors = diagnostics.filter((d) => d.severity === "error");
  return (
    <div className={`step-node${errors.length ? " invalid" : ""}${state ? ` state-${state}` : ""}`}
         data-testid={`node-${step.id}`} data-status={state || ""} data-history={history.join(" ")} aria-invalid={errors.length > 0}>
      <Handle type="target" position={Position.Top} id="before" className="order-handle" isConnectable={false} />
      <div className="handles top">
        {inputs.map((name) => (
          <div key={name} className="port in" title={`${name}: ${typeName(c.inputs[name]) || "any"}`}>
            <Handle type="target" position={Position.Top} id={`in:${name}`} data-testid={`in-${step.id}-${name}`}
                    className={fromType && !compatible(fromType, typeName(c.inputs[name])) ? "mismatch" : ""} />
            <span>{name}{c.required.includes(name) ? "*" : ""}</span>
          </div>
        ))}
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
const nodeTypes = { step: StepNode };

function Palette({ skills, groups, onAdd }) {
  const [filter, setFilter] = useState("");
  const wanted = filter.trim().toLowerCase();
  const shown = Object.values(skills).filter((s) => !wanted || s.name.includes(wanted)
    || (s.description || "").toLowerCase().includes(wanted));
  return (
    <aside className="palette" aria-label="Skills palette">
      <label htmlFor="palette-filter">Find a skill</label>
      <input id="palette-filter" type="search" value={filter} onChange={(e) => setFilter(e.target.value)} />
      <ul>
        {shown.map((s) => (
          <li key={s.id} draggable onDragStart={(e) => {
            e.dataTransfer.setData("application/x-skillgrove-skill", s.name);
            e.dataTransfer.effectAllowed = "copy";
          }} data-testid={`palette-${s.name}`} title={s.description}>
            <span className="name">{s.name}</span>
            <button type="button" aria-label={`Add ${s.name} to the canvas`} onClick={() => onAdd("skill", s.name)}>+</button>
          </li>
        ))}
      </ul>
      <h3>Groups</h3>
      <ul>
        {Object.values(groups).map((g) => (
          <li key={g.id}><span className="name">{g.id}</span>
            <button type="button" aria-label={`Add group ${g.id} as a step`} onClick={() => onAdd("group", g.id)}>+</button></li>
        ))}
      </ul>
    </aside>
  );
}

function Field({ id, label, diagnostics, children }) {
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children}
      {diagnostics.map((d, i) => (
        <p key={i} className={`field-diag ${d.severity}`} id={`${id}-diag-${i}`} data-rule={d.rule}>
          {d.message.replace(/^steps\[\d+\]\.[^:]*: /, "")}{d.hint ? ` — ${d.hint}` : ""}</p>
      ))}
    </div>
  );
}

function StepPanel({ step, diagnostics, upstream, onConnect, onChange, onRemove, onOpenGroup }) {
  const { skills, groups } = useContext(DragContext);
  const c = contract(step, skills, groups);
  const at = (field) => diagnostics.filter((d) => d.field === field || (d.field || "").startsWith(`${field}.`));
  const set = (key, value) => onChange((s) => { if (value === "" || value === undefined) delete s[key]; else s[key] = value; });
  const withValues = isObject(step.with) ? step.with : {};
  const names = [...new Set([...Object.keys(c.inputs), ...Object.keys(withValues)])];
  const text = (v) => (v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v));
  const parsed = (v) => { try { return /^[-\d[{tfn"]/.test(v.trim()) ? JSON.parse(v) : v; } catch { return v; } };
  const retry = isObject(step.retry) ? step.retry : {};
  const other = diagnostics.filter((d) => !d.field || !["with", "if", "retry", "timeout", "continue_on_error"].some((f) => d.field === f || d.field.startsWith(`${f}.`)));
  return (
    <section aria-labelledby="step-title">
      <h2 id="step-title">Step {step.id}</h2>
      <p className="muted">{step.skill ? `skill ${step.skill}` : `group ${step.group}`}
        {step.group && <> <button type="button" onClick={() => onOpenGroup(step.group)}>Open group</button></>}</p>
      {other.map((d, i) => <p key={i} className={`field-diag ${d.severity}`} data-rule={d.rule}>
        {d.message.replace(/^steps\[\d+\]\.?/, "").replace(/^: /, "")}{d.hint ? ` — ${d.hint}` : ""}</p>)}
      <fieldset>
        <legend>Inputs (with)</legend>
        {names.length === 0 && <p className="muted">This skill takes no inputs.</p>}
        {names.map((name) => (
          <Field key={name} id={`with-${name}`} label={`${name}${c.required.includes(name) ? " (required)" : ""}${typeName(c.inputs[name]) ? `: ${typeName(c.inputs[name])}` : ""}`}
                 diagnostics={at(`with.${name}`)}>
            <input id={`with-${name}`} value={text(withValues[name])} onChange={(e) => onChange((s) => {
              s.with = isObject(s.with) ? s.with : {};
              if (e.target.value === "") delete s.with[name]; else s.with[name] = parsed(e.target.value);
              if (!Object.keys(s.with).length) delete s.with;
            })} />
            <OutputPicker id={`from-${name}`} label={`Connect ${name} from an output`} upstream={upstream}
                          expected={typeName(c.inputs[name])} onPick={(from, output) => onConnect(from, output, name)} />
          </Field>
        ))}
      </fieldset>
      <fieldset>
        <legend>When and how</legend>
        <Field id="step-if" label="if (a condition)" diagnostics={at("if")}>
          <input id="step-if" value={text(step.if)} onChange={(e) => set("if", e.target.value)} />
        </Field>
        <Field id="step-timeout" label="timeout (e.g. 30s)" diagnostics={at("timeout")}>
          <input id="step-timeout" value={text(step.timeout)} onChange={(e) => set("timeout", e.target.value)} />
        </Field>
        <Field id="step-retry" label="retry: max attempts" diagnostics={at("retry")}>
          <input id="step-retry" type="number" min="1" value={retry.max_attempts ?? ""} onChange={(e) => onChange((s) => {
            if (e.target.value === "") delete s.retry;
            else s.retry = { ...(isObject(s.retry) ? s.retry : {}), max_attempts: Number(e.target.value) };
          })} />
        </Field>
        <div className="field checkbox">
          <input id="step-coe" type="checkbox" checked={step.continue_on_error === true}
                 onChange={(e) => set("continue_on_error", e.target.checked ? true : undefined)} />
          <label htmlFor="step-coe">continue on error</label>
        </div>
      </fieldset>
      <button type="button" className="danger" onClick={onRemove}>Remove step</button>
    </section>
  );
}

// The keyboard's way to connect: pick an upstream step's output for an input.
function OutputPicker({ id, label, upstream, expected, onPick }) {
  const { skills, groups } = useContext(DragContext);
  const options = upstream.flatMap((s) => Object.entries(contract(s, skills, groups).outputs).map(([output, schema]) => {
    const actual = typeName(schema);
    return { value: `${s.id}\u0000${output}`, text: `${s.id}.${output}${actual ? ` (${actual})` : ""}${compatible(actual, expected) ? "" : " — type mismatch"}` };
  }));
  if (!options.length) return null;
  return (
    <>
      <label htmlFor={id} className="sr-only">{label}</label>
      <select id={id} className="picker" value="" onChange={(e) => { const [from, output] = e.target.value.split("\u0000"); if (output) onPick(from, output); }}>
        <option value="">connect from…</option>
        {options.map((o) => <option key={o.value} value={o.value}>{o.text}</option>)}
      </select>
    </>
  );
}

function GroupPanel({ doc, update, isNew }) {
  const { skills, groups } = useContext(DragContext);
  const [name, setName] = useState("");
  const [type, setType] = useState("string");
  const [outName, setOutName] = useState("");
  const [outFrom, setOutFrom] = useState("");
  const outputs = isObject(doc.outputs) ? doc.outputs : {};
  const offered = stepsOf(doc).flatMap((s) => Object.keys(contract(s, skills, groups).outputs).map((o) => reference(s.id, o)));
  const inputs = isObject(doc.inputs) ? doc.inputs : {};
  const examples = Array.isArray(doc.examples) ? doc.examples : [];
  const set = (key, value) => update((d) => { if (value === "") delete d[key]; else d[key] = value; });
  return (
    <section aria-labelledby="group-title">
      <h2 id="group-title">Group</h2>
      <div className="field"><label htmlFor="group-id">id</label>
        <input id="group-id" value={doc.id || ""} readOnly={!isNew} onChange={(e) => set("id", e.target.value)} /></div>
      <div className="field"><label htmlFor="group-name">name</label>
        <input id="group-name" value={doc.name || ""} onChange={(e) => set("name", e.target.value)} /></div>
      <div className="field"><label htmlFor="group-description">description</label>
        <textarea id="group-description" rows="3" value={doc.description || ""} onChange={(e) => set("description", e.target.value)} /></div>
      <div className="field"><label htmlFor="group-examples">examples (one request a line)</label>
        <textarea id="group-examples" rows="3" value={examples.join("\n")}
                  onChange={(e) => update((d) => { const lines = e.target.value.split("\n"); if (lines.join("") === "") delete d.examples; else d.examples = lines; })} /></div>
      <fieldset>
        <legend>Inputs</legend>
        <ul className="inputs">
          {Object.entries(inputs).map(([key, spec]) => (
            <li key={key}><code>{key}</code> {isObject(spec) ? spec.type : ""}{isObject(spec) && spec.required ? ", required" : ""}
              <button type="button" aria-label={`Remove input ${key}`} onClick={() => update((d) => { delete d.inputs[key]; if (!Object.keys(d.inputs).length) delete d.inputs; })}>×</button></li>
          ))}
        </ul>
        <form className="row" onSubmit={(e) => {
          e.preventDefault();
          if (!name.trim()) return;
          update((d) => {
            const spec = { type, required: true };
            const names = Object.keys(isObject(d.inputs) ? d.inputs : {});
            if (!names.length && Array.isArray(d.steps)) {
              // inputs go before steps, as in the bundled files
              const next = {};
              for (const [k, v] of Object.entries(d)) { if (k === "steps") next.inputs = { [name.trim()]: spec }; next[k] = v; }
              if (!next.inputs) next.inputs = { [name.trim()]: spec };
              for (const k of Object.keys(d)) delete d[k];
              Object.assign(d, next);
            } else d.inputs = { ...d.inputs, [name.trim()]: spec };
          });
          setName("");
        }}>
          <label htmlFor="new-input" className="sr-only">New input name</label>
          <input id="new-input" placeholder="input name" value={name} onChange={(e) => setName(e.target.value)} />
          <label htmlFor="new-input-type" className="sr-only">Type</label>
          <select id="new-input-type" value={type} onChange={(e) => setType(e.target.value)}>
            {TYPES.map((t) => <option key={t}>{t}</option>)}
          </select>
          <button type="submit">Add input</button>
        </form>
      </fieldset>
      <fieldset>
        <legend>Outputs</legend>
        <ul className="inputs">
          {Object.entries(outputs).map(([key, value]) => (
            <li key={key}><code>{key}</code>: <code>{String(value)}</code>
              <button type="button" aria-label={`Remove output ${key}`} onClick={() => update((d) => { delete d.outputs[key]; if (!Object.keys(d.outputs).length) delete d.outputs; })}>×</button></li>
          ))}
        </ul>
        <form className="row" onSubmit={(e) => {
          e.preventDefault();
          if (!outName.trim() || !outFrom) return;
          update((d) => { d.outputs = { ...(isObject(d.outputs) ? d.outputs : {}), [outName.trim()]: outFrom }; });
          setOutName("");
        }}>
          <label htmlFor="new-output" className="sr-only">New output name</label>
          <input id="new-output" placeholder="output name" value={outName} onChange={(e) => setOutName(e.target.value)} />
          <label htmlFor="new-output-from" className="sr-only">Output value</label>
          <select id="new-output-from" value={outFrom} onChange={(e) => setOutFrom(e.target.value)}>
            <option value="">from…</option>
            {offered.map((o) => <option key={o} value={o}>{o.replace(/^\$\{\{ steps\.|\.outputs|\s*\}\}$/g, "")}</option>)}
          </select>
          <button type="submit">Add output</button>
        </form>
      </fieldset>
    </section>
  );
}

function RunPanel({ inputs, setInputs, context, setContext, plan }) {
  return (
    <section aria-labelledby="run-title" className="run">
      <h2 id="run-title">Try it</h2>
      <div className="field"><label htmlFor="run-inputs">inputs (JSON)</label>
        <textarea id="run-inputs" rows="3" value={inputs} onChange={(e) => setInputs(e.target.value)} /></div>
      <div className="field"><label htmlFor="run-context">context (JSON)</label>
        <textarea id="run-context" rows="2" value={context} onChange={(e) => setContext(e.target.value)} /></div>
      {plan && !plan.run && (
        <div data-testid="plan"><h3>Plan</h3><ol>{plan.levels.map((level, i) => <li key={i}>{level.join(", ")}</li>)}</ol>
          <ul>{plan.steps.filter((s) => s.skip_reason || s.decided_at_run_time).map((s) => (
            <li key={s.id}>{s.id}: {s.skip_reason ? `skipped (${s.skip_reason})` : `decided at run time by ${s.depends_on.join(", ")}`}</li>))}</ul></div>
      )}
      {plan && plan.run && (
        <div data-testid="outputs"><h3>Outputs</h3>
          {plan.steps.map((s) => (
            <details key={s.id}><summary>{s.id}: {s.status}</summary><pre>{JSON.stringify(s.outputs, null, 2).slice(0, 4000)}</pre>{s.error && <pre>{s.error}</pre>}</details>
          ))}</div>
      )}
    </section>
  );
}

function Diagnostics({ items, failed }) {
  if (!items.length && !failed) return null;
  return (
    <section className="diagnostics" aria-label="Group diagnostics" data-testid="group-diagnostics">
      {failed && <p className="error">{failed}</p>}
      <ul>{items.map((d, i) => (
        <li key={i} className={d.severity} data-rule={d.rule}>{d.line ? `${d.line}:${d.column || 1} ` : ""}{d.message}{d.hint ? ` — ${d.hint}` : ""} <code>[{d.rule}]</code></li>
      ))}</ul>
    </section>
  );
}

function Dialog({ title, onClose, children }) {
  const ref = useRef(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog && dialog.open && dialog.close();
  }, []);
  return (
    <dialog ref={ref} aria-labelledby="dialog-title" onCancel={(e) => { e.preventDefault(); onClose(); }}>
      <h2 id="dialog-title">{title}</h2>
      {children}
    </dialog>
  );
}

takeTokenFromAddress();
createRoot(document.getElementById("root")).render(<StrictMode><App /></StrictMode>);
