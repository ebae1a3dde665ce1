// "Try it": a form built from the group's inputs (types, required marks, choices, files from
// the library's samples) and the context values it reads; raw JSON stays behind an
// advanced toggle. Then the plan (order, side effects, what is decided at run time) or the
// run's outputs. The context goes out in the one shape every interface takes,
// {"values": {...}}; the server refuses any other, naming the key.
import { useContext, useEffect, useState } from "react";
import { call } from "./api.js";
import { contract, inputSpecs, isObject, referencesIn, stepsOf } from "./model.js";
import { EditorContext, plural } from "./shared.jsx";

export const EFFECTS = {
  "sends-email": "sends email", "sends-messages": "sends messages", "writes-files": "writes files",
  "deletes-files": "deletes files", network: "uses the network", "spends-money": "spends money",
  "changes-accounts": "changes accounts",
};

// A group input that some step uses as a file path (its schema says `format: path`).
function fileInputs(doc, skills, groups) {
  const out = new Set();
  for (const step of stepsOf(doc)) {
    const c = contract(step, skills, groups);
    for (const [input, value] of Object.entries(isObject(step.with) ? step.with : {})) {
      const schema = c.inputs[input];
      if (!isObject(schema) || schema.format !== "path") continue;
      for (const r of referencesIn(value)) if (r.kind === "inputs") out.add(r.name);
    }
  }
  return out;
}

function convert(raw, type) {
  if (raw === "" || raw === undefined) return undefined;
  if (type === "integer" || type === "number") return Number(raw);
  if (type === "boolean") return raw === true || raw === "true";
  if (type === "array" || type === "object") return JSON.parse(raw);
  return raw;
}

function parseObject(textValue, what, example = '{"name": "value"}') {
  try { const v = JSON.parse(textValue || "{}"); if (isObject(v)) return v; } catch { /* below */ }
  throw new Error(`${what} must be a JSON object, e.g. ${example}`);
}

export function RunPanel({ group, saved, onPlan, onRun, plan, contextNames }) {
  const { skills, groups } = useContext(EditorContext);
  const specs = inputSpecs(group);
  const files = fileInputs(group, skills, groups);
  const [values, setValues] = useState({});
  const [context, setContext] = useState({});
  const [raw, setRaw] = useState(false);
  const [rawInputs, setRawInputs] = useState("{}");
  const [rawContext, setRawContext] = useState('{"values": {}}');
  const [problem, setProblem] = useState(null);
  const [samples, setSamples] = useState([]);
  useEffect(() => {
    if (!files.size) return;
    call("GET", "samples").then((r) => setSamples(r.samples || []), () => setSamples([]));
  }, [files.size]);

  const fromForm = () => {
    const inputs = {};
    const missing = [];
    for (const [name, spec] of Object.entries(specs)) {
      let v;
      try { v = convert(values[name], spec.type); }
      catch { throw new Error(`${name} must be written as JSON (a list like ["a", "b"], or an object)`); }
      if (v === undefined || (typeof v === "number" && Number.isNaN(v))) {
        if (spec.required) missing.push(name);
        continue;
      }
      inputs[name] = v;
    }
    if (missing.length) throw new Error(`Please fill in ${missing.join(", ")} (required).`);
    const ctx = {};
    for (const name of contextNames) if ((context[name] || "").trim()) ctx[name] = context[name].trim();
    return { inputs, context: { values: ctx } };
  };
  const gather = () => {
    if (raw) return { inputs: parseObject(rawInputs, "Inputs"), context: parseObject(rawContext, "Context", '{"values": {"name": "value"}}') };
    return fromForm();
  };
  const act = (what) => {
    try { const v = gather(); setProblem(null); what(v); }
    catch (exc) { setProblem(exc.message); }
  };
  const toggleRaw = (on) => {
    if (on) {
      try {
        const v = fromForm();
        setRawInputs(JSON.stringify(v.inputs, null, 2));
        setRawContext(JSON.stringify(v.context, null, 2));
      } catch { /* keep what the boxes hold */ }
    }
    setRaw(on);
  };

  const field = (name, spec) => {
    const id = `run-input-${name}`;
    const label = `${name}${spec.required ? " (required)" : ""}`;
    const hint = [spec.type || "any", spec.default !== undefined ? `default ${JSON.stringify(spec.default)}` : null, spec.description].filter(Boolean).join(" · ");
    const set = (v) => setValues((old) => ({ ...old, [name]: v }));
    let control;
    if (Array.isArray(spec.enum)) {
      control = (
        <select id={id} value={values[name] ?? ""} onChange={(e) => set(e.target.value)} aria-describedby={`${id}-hint`}>
          <option value="">{spec.required ? "choose…" : "(default)"}</option>
          {spec.enum.map((v) => <option key={String(v)} value={String(v)}>{String(v)}</option>)}
        </select>
      );
    } else if (spec.type === "boolean") {
      control = <input id={id} type="checkbox" checked={values[name] === true} onChange={(e) => set(e.target.checked)} aria-describedby={`${id}-hint`} />;
    } else if (spec.type === "integer" || spec.type === "number") {
      control = <input id={id} type="number" step={spec.type === "integer" ? 1 : "any"} value={values[name] ?? ""}
                       placeholder={spec.default !== undefined ? String(spec.default) : ""} onChange={(e) => set(e.target.value)} aria-describedby={`${id}-hint`} />;
    } else if (spec.type === "array" || spec.type === "object") {
      control = <textarea id={id} rows="2" value={values[name] ?? ""} placeholder={spec.type === "array" ? '["a", "b"]' : '{"key": "value"}'}
                          onChange={(e) => set(e.target.value)} aria-describedby={`${id}-hint`} />;
    } else {
      control = <input id={id} value={values[name] ?? ""} onChange={(e) => set(e.target.value)} aria-describedby={`${id}-hint`}
                       placeholder={spec.default !== undefined ? String(spec.default) : ""} />;
    }
    return (
      <div className="field" key={name}>
        <label htmlFor={id}>{label}</label>
        <p className="help" id={`${id}-hint`}>{hint}</p>
        {control}
        {files.has(name) && <FileChooser name={name} samples={samples} onChoose={set} />}
        {files.has(name) && samples.some((x) => x.path === values[name]) && (
          <p className="help" data-testid={`run-sample-chosen-${name}`}>
            the library&apos;s sample {samples.find((x) => x.path === values[name]).name}</p>
        )}
      </div>
    );
  };

  return (
    <section aria-labelledby="run-title" className="run">
      <h2 id="run-title">Try it</h2>
      {!saved && <p className="muted">Save the group to plan or run it.</p>}
      <div className="field checkbox">
        <input id="run-raw" type="checkbox" checked={raw} onChange={(e) => toggleRaw(e.target.checked)} />
        <label htmlFor="run-raw">Advanced: write inputs and context as JSON</label>
      </div>
      {raw ? (
        <>
          <div className="field"><label htmlFor="run-inputs">inputs (JSON)</label>
            <textarea id="run-inputs" rows="4" value={rawInputs} onChange={(e) => setRawInputs(e.target.value)} /></div>
          <div className="field"><label htmlFor="run-context">context (JSON)</label>
            <p className="help" id="run-context-hint">{'{"values": {"team_email": "…"}}: the steps read each value as context.<name>'}</p>
            <textarea id="run-context" rows="3" value={rawContext} onChange={(e) => setRawContext(e.target.value)}
                      aria-describedby="run-context-hint" /></div>
        </>
      ) : (
        <>
          <fieldset aria-label="Run inputs">
            <legend>Inputs</legend>
            {Object.keys(specs).length === 0 && <p className="muted">This group takes no inputs.</p>}
            {Object.entries(specs).map(([name, spec]) => field(name, spec))}
          </fieldset>
          {contextNames.length > 0 && (
            <fieldset aria-label="Run context">
              <legend>Context</legend>
              {contextNames.map((name) => (
                <div className="field" key={name}>
                  <label htmlFor={`run-context-${name}`}>{name}</label>
                  <input id={`run-context-${name}`} value={context[name] ?? ""}
                         onChange={(e) => setContext((old) => ({ ...old, [name]: e.target.value }))} />
                </div>
              ))}
            </fieldset>
          )}
        </>
      )}
      {problem && <p className="error" role="alert">{problem}</p>}
      <div className="row">
        <button type="button" onClick={() => act(onPlan)} disabled={!saved}>Plan</button>
        <button type="button" onClick={() => act(onRun)} disabled={!saved}>Run</button>
      </div>
      {plan && !plan.run && <PlanView plan={plan} />}
      {plan && plan.run && (
        <div data-testid="outputs"><h3>Outputs</h3>
          {plan.steps.map((s) => (
            <details key={s.id}><summary>{s.id}: {s.status}</summary><pre>{JSON.stringify(s.outputs, null, 2).slice(0, 4000)}</pre>{s.error && <pre>{s.error}</pre>}</details>
          ))}</div>
      )}
    </section>
  );
}

function FileChooser({ name, samples, onChoose }) {
  return (
    <div className="files">
      {samples.length > 0 && (
        <>
          <label htmlFor={`run-sample-${name}`} className="sr-only">{`A sample file for ${name}`}</label>
          <select id={`run-sample-${name}`} value="" onChange={(e) => e.target.value && onChoose(e.target.value)}>
            <option value="">choose a sample file…</option>
            {samples.map((s) => <option key={s.path} value={s.path}>{s.name}</option>)}
          </select>
        </>
      )}
    </div>
  );
}

function PlanView({ plan }) {
  const effects = Object.entries(plan.effects || {});
  const later = plan.steps.filter((s) => s.decided_at_run_time);
  const skipped = plan.steps.filter((s) => s.skip_reason);
  return (
    <div data-testid="plan"><h3>Plan</h3>
      <p>The steps run in this order (steps on one line run side by side):</p>
      <ol>{plan.levels.map((level, i) => <li key={i}>{level.join(", ")}</li>)}</ol>
      <h4>Side effects</h4>
      {effects.length ? (
        <ul data-testid="plan-effects">{effects.map(([effect, steps]) => (
          <li key={effect}>{steps.join(", ")} {EFFECTS[effect] || effect}</li>))}</ul>
      ) : <p>None: this group only reads and writes its own run folder.</p>}
      <h4>Decided at run time</h4>
      {later.length ? (
        <ul data-testid="plan-later">{later.map((s) => (
          <li key={s.id}>{s.id}: runs or not depending on {s.depends_on.join(", ") || "what earlier steps produce"}</li>))}</ul>
      ) : <p>Nothing: with these inputs every step&apos;s fate is known now.</p>}
      {skipped.length > 0 && (
        <><h4>Skipped</h4><ul>{skipped.map((s) => <li key={s.id}>{s.id}: {s.skip_reason}</li>)}</ul></>
      )}
      <p className="muted">{plural(plan.steps.length, "step")} in all.</p>
    </div>
  );
}
