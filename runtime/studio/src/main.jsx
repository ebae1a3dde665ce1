// skillgrove studio: see the library, build and edit groups on a canvas, check, save, plan and
// run them. Everything shown comes from the public HTTP API and is rendered as text by React
// (never as HTML), so what skills and runs say cannot run in the page.
import { StrictMode, useCallback, useEffect, useMemo, useRef, useState } from "react";
import { createRoot } from "react-dom/client";
import { ReactFlowProvider } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import "./styles.css";
import { ApiError, call, setToken, takeTokenFromAddress } from "./api.js";
import { clone } from "./model.js";
import { Dialog, Studio, plural } from "./shared.jsx";
import { Editor } from "./editor.jsx";

function App() {
  const [view, setView] = useState("library");
  const [skills, setSkills] = useState({});
  const [groups, setGroups] = useState([]);
  const [drafts, setDrafts] = useState([]);
  const [needToken, setNeedToken] = useState(false);
  const [error, setError] = useState(null);
  const [editing, setEditing] = useState(null); // {doc, original, path, sha256, id}
  const dirty = useRef(false);
  const onDirty = useCallback((value) => { dirty.current = value; }, []);
  const [leaving, setLeaving] = useState(null); // what to do once unsaved changes may go
  // Opening another group or a new one replaces the one being edited: ask first when it has
  // unsaved changes.
  const guard = useCallback((action) => {
    if (dirty.current) setLeaving(() => action); else action();
  }, []);

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

  const openNow = useCallback(async (id, notice = null) => {
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
      dirty.current = false;
      await openNow(id, `Approved: ${result.path} is an ordinary group now`);
    } catch (exc) { setError(`Not approved: ${exc.message}`); }
  }, [load, openNow]);
  const openGroup = useCallback((id, notice = null) => guard(() => openNow(id, notice)), [guard, openNow]);

  const discard = useCallback(async (id) => {
    try { await call("DELETE", `drafts/${encodeURIComponent(id)}`); await load(); setView("library"); }
    catch (exc) { setError(`Not discarded: ${exc.message}`); }
  }, [load]);

  const newGroup = useCallback(() => guard(() => {
    dirty.current = false;
    setEditing({ doc: { id: "new-group", name: "New group", description: "", steps: [] },
                 original: null, path: "new-group.yaml", sha256: null, id: null, writable: true,
                 saved: false });
    setView("editor");
  }), [guard]);

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
        {editing && (
          // kept while the library is shown, so that nothing typed is lost
          <div hidden={view !== "editor"}>
            <ReactFlowProvider>
              <Editor key={editing.path + (editing.sha256 || "")} editing={editing} setEditing={setEditing} onDirty={onDirty} />
            </ReactFlowProvider>
          </div>
        )}
      </main>
      {leaving && (
        <Dialog title="Leave without saving?" onClose={() => setLeaving(null)}>
          <p>The group you are editing has changes that are not saved. They are lost if you go on.</p>
          <div className="row">
            <button type="button" onClick={() => { const go = leaving; setLeaving(null); dirty.current = false; go(); }}>Discard changes</button>
            <button type="button" onClick={() => { setLeaving(null); setView("editor"); }}>Keep editing</button>
          </div>
        </Dialog>
      )}
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
    try { setToolbox(await call("POST", "search?detail=full", { request })); setSearchError(null); }
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
        {toolbox && <SearchAnswer toolbox={toolbox} onOpen={onOpen} />}
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
                  {g.errors && g.errors.length > 0 && <details><summary>{plural(g.errors.length, "problem")}</summary><pre>{g.errors.join("\n")}</pre></details>}</td>
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
                  <td><span className={`status ${d.valid ? "valid" : "errors"}`}>{d.valid ? "passes" : plural(d.errors, "problem")}</span></td>
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
                  <button type="button" onClick={() => showImpact(s.name)} aria-label={`Show which groups use ${s.name}`}>Show</button>)}</td>
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

// The search's answer in plain words; the scores and the engine's reasoning behind a toggle.
function SearchAnswer({ toolbox, onOpen }) {
  const chosen = toolbox.skills.filter((s) => s.selected);
  const skillsText = (chosen.length ? chosen : toolbox.skills.slice(0, 3)).map((s) => s.name).join(", ");
  return (
    <div className="result" data-testid="search-result">
      {toolbox.shape === "group" && toolbox.group ? (
        <p>An agent asking this gets the group <strong>{toolbox.group.id}</strong>
          {toolbox.group.steps ? ` (${toolbox.group.steps.length} steps)` : ""}: {toolbox.group.description}{" "}
          <button type="button" onClick={() => onOpen(toolbox.group.id)}>Open {toolbox.group.id}</button></p>
      ) : (
        <p>No group is a good fit, so an agent asking this gets single skills: <strong>{skillsText || "none"}</strong>.
          {toolbox.group_candidates && toolbox.group_candidates.length > 0
            ? ` The closest group, ${toolbox.group_candidates[0].id}, would do more than was asked.` : ""}</p>
      )}
      <details>
        <summary>Details (scores)</summary>
        {toolbox.fallback_reason && <p>Why: {toolbox.fallback_reason}</p>}
        <ul>
          {(toolbox.group_candidates || []).slice(0, 3).map((g) => <li key={`g-${g.id}`}>group {g.id}: score {Number(g.score).toFixed(2)}</li>)}
          {toolbox.skills.slice(0, 5).map((s) => <li key={s.id}>skill {s.name}: score {s.score === null || s.score === undefined ? "—" : Number(s.score).toFixed(2)}{s.selected ? " (chosen)" : ""}</li>)}
        </ul>
      </details>
    </div>
  );
}

takeTokenFromAddress();
createRoot(document.getElementById("root")).render(<StrictMode><App /></StrictMode>);
