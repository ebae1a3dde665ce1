// The editor's side panels: the palette of skills and groups, a step's properties (its
// inputs, each connected from an output or given a value; when and how it runs) and the
// group's own (id, description, inputs, context values, outputs).
import { useContext, useRef, useState } from "react";
import {
  compatible, contract, isObject, reference, sourceReference, stepsOf, typeName,
} from "./model.js";
import { EditorContext } from "./shared.jsx";

const TYPES = ["string", "integer", "number", "boolean", "array", "object"];

function words(text) {
  return text.toLowerCase().split(/[\s,]+/).filter(Boolean);
}

function matches(wanted, ...texts) {
  const hay = texts.filter(Boolean).join(" ").toLowerCase();
  return wanted.every((w) => hay.includes(w));
}

export function Palette({ skills, groups, onAdd }) {
  const [filter, setFilter] = useState("");
  const wanted = words(filter);
  const shown = Object.values(skills).filter((s) => matches(wanted, s.name, s.description, (s.tags || []).join(" ")));
  const shownGroups = Object.values(groups).filter((g) => matches(wanted, g.id, g.name, g.description));
  return (
    <aside className="palette" aria-label="Skills palette">
      <label htmlFor="palette-filter">Find a skill (words in its name or description)</label>
      <input id="palette-filter" type="search" value={filter} onChange={(e) => setFilter(e.target.value)}
             placeholder="e.g. pdf email" />
      <p className="muted small" aria-live="polite">{shown.length} of {Object.keys(skills).length} skills. Drag one onto the canvas, or press +.</p>
      <ul>
        {shown.map((s) => (
          <li key={s.id} draggable onDragStart={(e) => {
            e.dataTransfer.setData("application/x-skillgrove-skill", s.name);
            e.dataTransfer.effectAllowed = "copy";
          }} data-testid={`palette-${s.name}`}>
            <div className="entry">
              <span className="name">{s.name}</span>
              <span className="description">{s.description}</span>
            </div>
            <button type="button" aria-label={`Add ${s.name} to the canvas`} onClick={() => onAdd("skill", s.name)}>+</button>
          </li>
        ))}
      </ul>
      <h3>Groups (as one step)</h3>
      <ul>
        {shownGroups.map((g) => (
          <li key={g.id} draggable onDragStart={(e) => {
            e.dataTransfer.setData("application/x-skillgrove-group", g.id);
            e.dataTransfer.effectAllowed = "copy";
          }}>
            <div className="entry"><span className="name">{g.id}</span><span className="description">{g.description}</span></div>
            <button type="button" aria-label={`Add group ${g.id} as a step`} onClick={() => onAdd("group", g.id)}>+</button></li>
        ))}
      </ul>
    </aside>
  );
}

function Field({ id, label, help, diagnostics, children }) {
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {help && <p className="help" id={`${id}-help`}>{help}</p>}
      {children}
      {diagnostics.map((d, i) => (
        <p key={i} className={`field-diag ${d.severity}`} id={`${id}-diag-${i}`} data-rule={d.rule}>
          {d.message.replace(/^steps\[\d+\]\.[^:]*: /, "")}{d.hint ? ` — ${d.hint}` : ""}</p>
      ))}
    </div>
  );
}

// Everything a step's input can read, as {value: the reference, text, type, step?}: the
// group's inputs, the context values, and the outputs of the steps that run before it.
function offered(sources, upstream, skills, groups) {
  const out = [];
  for (const s of sources) {
    out.push({ group: s.kind === "inputs" ? "Group inputs" : "Context values", key: s.id, from: s.id, output: "value",
               ref: sourceReference(s.kind, s.name), text: s.id, type: s.type });
  }
  for (const step of upstream) {
    for (const [output, schema] of Object.entries(contract(step, skills, groups).outputs)) {
      out.push({ group: "Outputs of earlier steps", key: `${step.id}.${output}`, from: String(step.id), output,
                 ref: reference(step.id, output), text: `${step.id}.${output}`, type: typeName(schema), step: String(step.id) });
    }
  }
  return out;
}

function Options({ items, expected }) {
  const grouped = {};
  for (const o of items) (grouped[o.group] = grouped[o.group] || []).push(o);
  return Object.entries(grouped).map(([label, list]) => (
    <optgroup key={label} label={label}>
      {list.map((o) => (
        <option key={o.key} value={o.key}>
          {o.text} ({o.type || "any"}){expected !== undefined && !compatible(o.type, expected) && expected !== "array" ? " — type mismatch" : ""}
        </option>
      ))}
    </optgroup>
  ));
}

const text = (v) => (v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v));

// What the user typed, as the value to store: JSON where it reads as JSON, a list for a list
// input written as "a, b, c", else the text.
function parsed(raw, type) {
  const v = raw.trim();
  if (type === "array" && v && !/^[[$]/.test(v)) return v.split(",").map((x) => x.trim()).filter(Boolean);
  try { return /^[-\d[{tfn"]/.test(v) ? JSON.parse(v) : raw; } catch { return raw; }
}

function shown(value, type) {
  if (type === "array" && Array.isArray(value) && value.length && value.every((x) => typeof x === "string" && !x.includes("${{") && !x.includes(","))) {
    return value.join(", ");
  }
  return text(value);
}

// A step's id, changed where it is used too once the user leaves the field or presses Enter.
function StepName({ id, onRename }) {
  const [value, setValue] = useState(String(id));
  const [problem, setProblem] = useState(null);
  const apply = () => { const why = onRename(value.trim()); setProblem(why); if (why) return; };
  return (
    <div className="field">
      <label htmlFor="step-id">step id (its name in the group)</label>
      <input id="step-id" value={value} onChange={(e) => setValue(e.target.value)} onBlur={apply}
             onKeyDown={(e) => { if (e.key === "Enter") { e.preventDefault(); apply(); } }}
             aria-invalid={problem ? true : undefined} aria-describedby={problem ? "step-id-problem" : undefined} />
      {problem && <p className="field-diag error" id="step-id-problem">{problem}</p>}
    </div>
  );
}

export function StepPanel({ step, diagnostics, sources, upstream, onConnect, onChange, onRemove, onRename, onOpenGroup }) {
  const { skills, groups } = useContext(EditorContext);
  const c = contract(step, skills, groups);
  const at = (field) => diagnostics.filter((d) => d.field === field || (d.field || "").startsWith(`${field}.`));
  const set = (key, value) => onChange((s) => { if (value === "" || value === undefined) delete s[key]; else s[key] = value; }, `set:${key}`);
  const withValues = isObject(step.with) ? step.with : {};
  const names = [...new Set([...Object.keys(c.inputs), ...Object.keys(withValues)])];
  const retry = isObject(step.retry) ? step.retry : {};
  const options = offered(sources, upstream, skills, groups);
  const fields = useRef({});
  const other = diagnostics.filter((d) => !d.field || !["with", "if", "retry", "timeout", "continue_on_error"].some((f) => d.field === f || d.field.startsWith(`${f}.`)));
  const setWith = (name, value, key) => onChange((s) => {
    s.with = isObject(s.with) ? s.with : {};
    if (value === "" || value === undefined) delete s.with[name]; else s.with[name] = value;
    if (!Object.keys(s.with).length) delete s.with;
  }, key);
  // A reference put into the text where the cursor is (a subject line, a mail body).
  const insert = (name, option) => {
    const field = fields.current[name];
    const now = text(withValues[name]);
    const start = field ? field.selectionStart ?? now.length : now.length;
    const end = field ? field.selectionEnd ?? now.length : now.length;
    const next = now.slice(0, start) + option.ref + now.slice(end);
    onChange((s) => {
      s.with = isObject(s.with) ? s.with : {};
      s.with[name] = next;
      if (option.step) {
        const needs = Array.isArray(s.needs) ? s.needs : typeof s.needs === "string" ? [s.needs] : [];
        if (!needs.includes(option.step)) s.needs = [...needs, option.step];
      }
    });
  };
  return (
    <section aria-labelledby="step-title">
      <h2 id="step-title">Step {step.id}</h2>
      <p className="muted">{step.skill ? `skill ${step.skill}` : `group ${step.group}`}
        {step.group && <> <button type="button" onClick={() => onOpenGroup(step.group)}>Open group</button></>}</p>
      <StepName id={step.id} onRename={onRename} />
      {other.map((d, i) => <p key={i} className={`field-diag ${d.severity}`} data-rule={d.rule}>
        {d.message.replace(/^steps\[\d+\]\.?/, "").replace(/^: /, "")}{d.hint ? ` — ${d.hint}` : ""}</p>)}
      <fieldset>
        <legend>Inputs (with)</legend>
        {names.length === 0 && <p className="muted">This skill takes no inputs.</p>}
        {names.map((name) => {
          const type = typeName(c.inputs[name]);
          const schema = c.inputs[name] || {};
          const value = withValues[name];
          const multiline = typeof value === "string" && value.includes("\n");
          return (
            <Field key={name} id={`with-${name}`} label={`${name}${c.required.includes(name) ? " (required)" : ""}${type ? `: ${type}` : ""}`}
                   help={schema.description} diagnostics={at(`with.${name}`)}>
              {type === "string" || type === null ? (
                <textarea id={`with-${name}`} rows={multiline ? 6 : 1} value={text(value)} ref={(el) => { fields.current[name] = el; }}
                          aria-describedby={schema.description ? `with-${name}-help` : undefined}
                          onChange={(e) => setWith(name, type === "string" ? e.target.value : parsed(e.target.value, type), `with:${step.id}.${name}`)} />
              ) : (
                <input id={`with-${name}`} value={shown(value, type)} ref={(el) => { fields.current[name] = el; }}
                       aria-describedby={schema.description ? `with-${name}-help` : undefined}
                       placeholder={type === "array" ? "a, b, c — or connect a list" : undefined}
                       onChange={(e) => setWith(name, e.target.value === "" ? "" : parsed(e.target.value, type), `with:${step.id}.${name}`)} />
              )}
              {options.length > 0 && (
                <div className="pickers">
                  <label htmlFor={`from-${name}`} className="sr-only">{`Connect ${name} from an output`}</label>
                  <select id={`from-${name}`} className="picker" value="" onChange={(e) => {
                    const o = options.find((x) => x.key === e.target.value);
                    if (o) onConnect(o.from, o.output, name);
                  }}>
                    <option value="">connect from…</option>
                    <Options items={options} expected={type} />
                  </select>
                  {(type === "string" || type === null) && (
                    <>
                      <label htmlFor={`insert-${name}`} className="sr-only">{`Insert a value into ${name}`}</label>
                      <select id={`insert-${name}`} className="picker" value="" onChange={(e) => {
                        const o = options.find((x) => x.key === e.target.value);
                        if (o) insert(name, o);
                      }}>
                        <option value="">insert into the text…</option>
                        <Options items={options} />
                      </select>
                    </>
                  )}
                </div>
              )}
            </Field>
          );
        })}
      </fieldset>
      <fieldset>
        <legend>When and how</legend>
        <ConditionBuilder options={options} onSet={(condition) => set("if", condition)} />
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
          }, "retry")} />
        </Field>
        <Field id="step-retry-wait" label="retry: first wait (e.g. 1s)" diagnostics={[]}>
          <input id="step-retry-wait" value={text(retry.initial_interval)} disabled={!retry.max_attempts} onChange={(e) => onChange((s) => {
            const next = { ...(isObject(s.retry) ? s.retry : {}) };
            if (e.target.value === "") delete next.initial_interval; else next.initial_interval = e.target.value;
            s.retry = next;
          }, "retry-wait")} />
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

const CONDITIONS = [
  ["set", "is set", "!= null"],
  ["unset", "is not set", "== null"],
  ["true", "is true", "== true"],
  ["false", "is false", "== false"],
  ["eq", "equals", "=="],
  ["ne", "does not equal", "!="],
];

function literal(raw) {
  const v = raw.trim();
  return /^-?\d+(\.\d+)?$/.test(v) ? v : `'${v.replace(/'/g, "''")}'`;
}

// "Run this step only when [value] [is set]": the `if` written by choosing, not typing.
function ConditionBuilder({ options, onSet }) {
  const [what, setWhat] = useState("");
  const [how, setHow] = useState("set");
  const [against, setAgainst] = useState("");
  const chosen = options.find((o) => o.key === what);
  const needsValue = how === "eq" || how === "ne";
  const apply = () => {
    if (!chosen) return;
    const op = CONDITIONS.find(([k]) => k === how)[2];
    const inner = chosen.ref.replace(/^\$\{\{\s*|\s*\}\}$/g, "");
    onSet(`\${{ ${inner} ${op}${needsValue ? ` ${literal(against)}` : ""} }}`);
  };
  return (
    <div className="condition" role="group" aria-labelledby="condition-title">
      <p id="condition-title" className="label">Run this step only when</p>
      <div className="row wrap">
        <label htmlFor="condition-value" className="sr-only">Condition: value</label>
        <select id="condition-value" value={what} onChange={(e) => setWhat(e.target.value)}>
          <option value="">choose a value…</option>
          <Options items={options} />
        </select>
        <label htmlFor="condition-test" className="sr-only">Condition: test</label>
        <select id="condition-test" value={how} onChange={(e) => setHow(e.target.value)}>
          {CONDITIONS.map(([k, label]) => <option key={k} value={k}>{label}</option>)}
        </select>
        {needsValue && (<>
          <label htmlFor="condition-against" className="sr-only">Condition: compared with</label>
          <input id="condition-against" value={against} onChange={(e) => setAgainst(e.target.value)} />
        </>)}
        <button type="button" onClick={apply} disabled={!chosen}>Set condition</button>
      </div>
    </div>
  );
}

export function GroupPanel({ doc, update, isNew, contextNames, onAddContext }) {
  const { skills, groups } = useContext(EditorContext);
  const [name, setName] = useState("");
  const [type, setType] = useState("string");
  const [required, setRequired] = useState(true);
  const [fallback, setFallback] = useState("");
  const [ctxName, setCtxName] = useState("");
  const [outName, setOutName] = useState("");
  const [outFrom, setOutFrom] = useState("");
  const outputs = isObject(doc.outputs) ? doc.outputs : {};
  const offeredOutputs = stepsOf(doc).flatMap((s) => Object.keys(contract(s, skills, groups).outputs).map((o) => reference(s.id, o)));
  const inputs = isObject(doc.inputs) ? doc.inputs : {};
  const examples = Array.isArray(doc.examples) ? doc.examples : [];
  const set = (key, value) => update((d) => { if (value === "") delete d[key]; else d[key] = value; }, `group:${key}`);
  const addInput = (e) => {
    e.preventDefault();
    const key = name.trim();
    if (!key) return;
    const spec = { type };
    if (fallback.trim() !== "") {
      const v = parsed(fallback, type);
      spec.default = type === "integer" || type === "number" ? Number(v) : type === "boolean" ? v === true || v === "true" : v;
    } else if (required) spec.required = true;
    update((d) => {
      const names = Object.keys(isObject(d.inputs) ? d.inputs : {});
      if (!names.length && Array.isArray(d.steps)) {
        // inputs go before steps, as in the bundled files
        const next = {};
        for (const [k, v] of Object.entries(d)) { if (k === "steps") next.inputs = { [key]: spec }; next[k] = v; }
        if (!next.inputs) next.inputs = { [key]: spec };
        for (const k of Object.keys(d)) delete d[k];
        Object.assign(d, next);
      } else d.inputs = { ...(isObject(d.inputs) ? d.inputs : {}), [key]: spec };
    });
    setName("");
    setFallback("");
  };
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
                  onChange={(e) => update((d) => { const lines = e.target.value.split("\n"); if (lines.join("") === "") delete d.examples; else d.examples = lines; }, "group:examples")} /></div>
      <fieldset>
        <legend>Inputs</legend>
        <ul className="inputs">
          {Object.entries(inputs).map(([key, spec]) => (
            <li key={key}><span className="what"><code>{key}</code> {isObject(spec) ? spec.type : String(spec ?? "")}{isObject(spec) && spec.required ? ", required" : ""}
              {isObject(spec) && spec.default !== undefined ? `, default ${JSON.stringify(spec.default)}` : ""}</span>
              <button type="button" aria-label={`Remove input ${key}`} onClick={() => update((d) => { delete d.inputs[key]; if (!Object.keys(d.inputs).length) delete d.inputs; })}>×</button></li>
          ))}
        </ul>
        <form className="add-input" onSubmit={addInput}>
          <label htmlFor="new-input" className="sr-only">New input name</label>
          <input id="new-input" placeholder="input name" value={name} onChange={(e) => setName(e.target.value)} />
          <label htmlFor="new-input-type" className="sr-only">Type</label>
          <select id="new-input-type" value={type} onChange={(e) => setType(e.target.value)}>
            {TYPES.map((t) => <option key={t}>{t}</option>)}
          </select>
          <label htmlFor="new-input-default" className="sr-only">Default value</label>
          <input id="new-input-default" placeholder="default (optional)" value={fallback} onChange={(e) => setFallback(e.target.value)} />
          <span className="field checkbox">
            <input id="new-input-required" type="checkbox" checked={required && fallback.trim() === ""} disabled={fallback.trim() !== ""}
                   onChange={(e) => setRequired(e.target.checked)} />
            <label htmlFor="new-input-required">required</label>
          </span>
          <button type="submit">Add input</button>
        </form>
      </fieldset>
      <fieldset>
        <legend>Context values</legend>
        <p className="help">Values the caller passes along with a request (a team&apos;s address, a report&apos;s name); each is a node on the canvas.</p>
        <ul className="inputs">{contextNames.map((n) => <li key={n}><code>context.{n}</code></li>)}</ul>
        <form className="row" onSubmit={(e) => {
          e.preventDefault();
          const key = ctxName.trim();
          if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) return;
          onAddContext(key);
          setCtxName("");
        }}>
          <label htmlFor="new-context" className="sr-only">New context value name</label>
          <input id="new-context" placeholder="e.g. team_email" value={ctxName} onChange={(e) => setCtxName(e.target.value)} />
          <button type="submit">Add context value</button>
        </form>
      </fieldset>
      <fieldset>
        <legend>Outputs</legend>
        <ul className="inputs">
          {Object.entries(outputs).map(([key, value]) => (
            <li key={key}><span className="what"><code>{key}</code> from <code>{String(value).replace(/^\$\{\{\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}$/, "$1.$2")}</code></span>
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
          <select id="new-output-from" value={outFrom} onChange={(e) => {
            setOutFrom(e.target.value);
            if (!outName.trim() && e.target.value) setOutName(e.target.value.replace(/^.*\.outputs\.|\s*\}\}$/g, ""));
          }}>
            <option value="">from…</option>
            {offeredOutputs.map((o) => <option key={o} value={o}>{o.replace(/^\$\{\{ steps\.|\.outputs|\s*\}\}$/g, "")}</option>)}
          </select>
          <button type="submit">Add output</button>
        </form>
      </fieldset>
    </section>
  );
}

