// The group being edited is a plain JSON document, the same shape as the group file. These
// helpers read it (steps, types, references) and turn a change into the server's edits.
import dagre from "@dagrejs/dagre";

export const NODE_WIDTH = 250;

// Wide enough for a handle per input and output, about 80 px each (labels at 12 px).
export function nodeWidth(ports) {
  return Math.max(NODE_WIDTH, 80 * ports);
}

export function clone(value) {
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
}

export function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function equal(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

function join(path, part) {
  return typeof part === "number" ? `${path}[${part}]` : path ? `${path}.${part}` : part;
}

// Structured edits (set / delete / append) that turn `before` into `after`; the server applies
// them to the file so that what they do not touch keeps its comments and layout.
export function diffEdits(before, after, path = "", out = []) {
  if (equal(before, after)) return out;
  if (isObject(before) && isObject(after)) {
    for (const key of Object.keys(before)) {
      if (!(key in after)) out.push({ op: "delete", path: join(path, key) });
    }
    for (const key of Object.keys(after)) {
      if (!(key in before)) out.push({ op: "set", path: join(path, key), value: after[key] });
      else diffEdits(before[key], after[key], join(path, key), out);
    }
    return out;
  }
  if (Array.isArray(before) && Array.isArray(after) && path) {
    const shared = Math.min(before.length, after.length);
    for (let i = 0; i < shared; i++) diffEdits(before[i], after[i], join(path, i), out);
    for (let i = shared; i < after.length; i++) out.push({ op: "append", path, value: after[i] });
    for (let i = before.length - 1; i >= after.length; i--) out.push({ op: "delete", path: join(path, i) });
    return out;
  }
  if (!path) return [{ op: "set", path: "steps", value: after.steps }];
  out.push({ op: "set", path, value: after });
  return out;
}

export function stepsOf(doc) {
  return Array.isArray(doc && doc.steps) ? doc.steps.filter(isObject) : [];
}

export function properties(schema) {
  return isObject(schema) && isObject(schema.properties) ? schema.properties : {};
}

export function typeName(schema) {
  if (!isObject(schema)) return null;
  if (typeof schema.type === "string") return schema.type;
  if (Array.isArray(schema.type)) return schema.type.join(" | ");
  return null;
}

export function compatible(actual, expected) {
  if (!actual || !expected) return true;
  const wanted = expected.split(" | ");
  return wanted.includes(actual) || (actual === "integer" && wanted.includes("number"));
}

// The contract of a step's target: {inputs: {name: schema}, required: [...], outputs: {...}}.
export function contract(step, skills, groups) {
  if (step.skill) {
    const skill = skills[step.skill];
    if (!skill) return { inputs: {}, required: [], outputs: {}, known: false };
    return {
      inputs: properties(skill.input_schema),
      required: (skill.input_schema && skill.input_schema.required) || [],
      outputs: properties(skill.output_schema),
      known: true,
    };
  }
  if (step.group) {
    const group = groups[step.group];
    if (!group) return { inputs: {}, required: [], outputs: {}, known: false };
    const outputs = {};
    for (const name of group.outputs || []) outputs[name] = {};
    return {
      inputs: properties(group.input_schema),
      required: (group.input_schema && group.input_schema.required) || [],
      outputs,
      known: true,
    };
  }
  return { inputs: {}, required: [], outputs: {}, known: false };
}

export function reference(stepId, output) {
  return `\${{ steps.${stepId}.outputs.${output} }}`;
}

export function newStepId(doc, name) {
  const stem = name.replace(/[^A-Za-z0-9_]+/g, "_").replace(/^_+|_+$/g, "") || "step";
  const taken = new Set(stepsOf(doc).map((s) => s.id));
  if (!taken.has(stem)) return stem;
  for (let n = 2; ; n++) if (!taken.has(`${stem}_${n}`)) return `${stem}_${n}`;
}

export function needsOf(step) {
  if (Array.isArray(step.needs)) return step.needs.filter((n) => typeof n === "string");
  return typeof step.needs === "string" ? [step.needs] : [];
}

// Top to bottom, parallel steps side by side (dagre), each node as tall as its handles need.
export function layout(doc, widthOf = () => NODE_WIDTH) {
  const graph = new dagre.graphlib.Graph();
  graph.setGraph({ rankdir: "TB", nodesep: 40, ranksep: 70, marginx: 20, marginy: 20 });
  graph.setDefaultEdgeLabel(() => ({}));
  const steps = stepsOf(doc);
  const ids = new Set(steps.map((s) => s.id));
  for (const step of steps) graph.setNode(String(step.id), { width: widthOf(step), height: 120 });
  for (const step of steps) {
    for (const need of needsOf(step)) if (ids.has(need)) graph.setEdge(need, String(step.id));
  }
  dagre.layout(graph);
  const positions = {};
  for (const step of steps) {
    const node = graph.node(String(step.id));
    positions[step.id] = { x: node.x - widthOf(step) / 2, y: node.y - 60 };
  }
  return positions;
}

// -- what a group reads: its inputs, the context values, the outputs of its steps -------------

const EXPRESSION = /\$\{\{([\s\S]*?)\}\}/g;
const SOURCE_REF = /(?<![\w.])(inputs|context)\.([A-Za-z_][A-Za-z0-9_]*)/g;
const STEP_REF = /(?<![\w.])steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)/g;

// Every reference inside the `${{ }}` of a value (strings, lists and maps looked into):
// [{kind: "inputs" | "context", name} | {kind: "steps", step, output}].
export function referencesIn(value, out = []) {
  if (typeof value === "string") {
    for (const [, body] of value.matchAll(EXPRESSION)) {
      for (const [, kind, name] of body.matchAll(SOURCE_REF)) out.push({ kind, name });
      for (const [, step, output] of body.matchAll(STEP_REF)) out.push({ kind: "steps", step, output });
    }
  } else if (Array.isArray(value)) for (const item of value) referencesIn(item, out);
  else if (isObject(value)) for (const item of Object.values(value)) referencesIn(item, out);
  return out;
}

// The node id of a group input or a context value on the canvas ("inputs.pdf_path"): a dot
// cannot occur in a step id, so the two never clash.
export function sourceId(kind, name) {
  return `${kind}.${name}`;
}

export function sourceReference(kind, name) {
  return `\${{ ${kind}.${name} }}`;
}

export function inputSpecs(doc) {
  const out = {};
  for (const [name, spec] of Object.entries(isObject(doc && doc.inputs) ? doc.inputs : {})) {
    out[name] = isObject(spec) ? spec : { type: typeof spec === "string" ? spec : undefined };
  }
  return out;
}

// The context values the group reads, in the order they first appear, and any the user
// put on the canvas before wiring them.
export function contextNames(doc, declared = []) {
  const names = [];
  const add = (n) => { if (!names.includes(n)) names.push(n); };
  for (const step of stepsOf(doc)) {
    for (const r of referencesIn([step.with, step.if])) if (r.kind === "context") add(r.name);
  }
  for (const r of referencesIn(doc && doc.outputs)) if (r.kind === "context") add(r.name);
  for (const n of declared) add(n);
  return names;
}

// The steps that run after `stepId` (need it, directly or through others, or read its
// outputs): connecting one of their outputs into `stepId` would make a cycle.
export function downstreamOf(doc, stepId) {
  const after = new Map(); // step -> the steps that read it
  for (const step of stepsOf(doc)) {
    const reads = new Set(needsOf(step));
    for (const r of referencesIn([step.with, step.if])) if (r.kind === "steps") reads.add(r.step);
    for (const from of reads) {
      if (!after.has(from)) after.set(from, new Set());
      after.get(from).add(step.id);
    }
  }
  const found = new Set();
  const todo = [stepId];
  while (todo.length) {
    for (const next of after.get(todo.pop()) || []) {
      if (!found.has(next)) { found.add(next); todo.push(next); }
    }
  }
  return found;
}

// Top to bottom with the group's inputs and context values in the first row.
export function layoutAll(doc, widthOf, sources) {
  const graph = new dagre.graphlib.Graph();
  graph.setGraph({ rankdir: "TB", nodesep: 30, ranksep: 55, marginx: 20, marginy: 20 });
  graph.setDefaultEdgeLabel(() => ({}));
  const steps = stepsOf(doc);
  const ids = new Set(steps.map((s) => String(s.id)));
  for (const s of sources) graph.setNode(s.id, { width: 190, height: 64 });
  for (const step of steps) graph.setNode(String(step.id), { width: widthOf(step), height: 84 });
  for (const step of steps) {
    for (const need of needsOf(step)) if (ids.has(need)) graph.setEdge(need, String(step.id));
    for (const r of referencesIn([step.with, step.if])) {
      if (r.kind === "steps" && ids.has(r.step)) graph.setEdge(r.step, String(step.id));
      else if (r.kind !== "steps" && graph.hasNode(sourceId(r.kind, r.name))) graph.setEdge(sourceId(r.kind, r.name), String(step.id));
    }
  }
  dagre.layout(graph);
  const positions = {};
  for (const id of graph.nodes()) {
    const node = graph.node(id);
    positions[id] = { x: node.x - node.width / 2, y: node.y - node.height / 2 };
  }
  // The inputs and context values all in one row above the first step, in the order dagre
  // put them (near what they feed), none on another.
  const top = steps.length ? Math.min(...steps.map((s) => positions[String(s.id)].y)) : 84;
  let right = -Infinity;
  for (const s of [...sources].sort((a, b) => positions[a.id].x - positions[b.id].x)) {
    const x = Math.max(positions[s.id].x, right + 20);
    positions[s.id] = { x, y: top - 64 - 50 };
    right = x + 190;
  }
  return positions;
}

// The document with step `from` called `to`: its id, the needs naming it and every reference
// to its outputs (in values, conditions and the group's outputs).
export function renameStep(doc, from, to) {
  const pattern = new RegExp(`(?<![\\w.])steps\\.${from.replace(/[-]/g, "\\-")}\\.outputs\\.`, "g");
  const inText = (value) => {
    if (typeof value === "string") {
      return value.replace(/\$\{\{[\s\S]*?\}\}/g, (expression) => expression.replace(pattern, `steps.${to}.outputs.`));
    }
    if (Array.isArray(value)) return value.map(inText);
    if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, inText(v)]));
    return value;
  };
  const next = clone(doc);
  for (const step of stepsOf(next)) {
    if (step.id === from) step.id = to;
    if (Array.isArray(step.needs)) step.needs = step.needs.map((n) => (n === from ? to : n));
    else if (step.needs === from) step.needs = to;
    if (step.with !== undefined) step.with = inText(step.with);
    if (step.if !== undefined) step.if = inText(step.if);
  }
  if (next.outputs !== undefined) next.outputs = inText(next.outputs);
  return next;
}
