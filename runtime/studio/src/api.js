// The studio's only way to the server: the public HTTP API under /v1 (the same an agent uses).
// A token given in the address (#token=...) is kept for this tab and sent as a bearer token.

const KEY = "skillgrove-token";

export function takeTokenFromAddress() {
  const match = /(?:^#|&)token=([^&]*)/.exec(window.location.hash);
  if (match) {
    sessionStorage.setItem(KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
}

export function setToken(token) {
  if (token) sessionStorage.setItem(KEY, token);
  else sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code || "error";
    this.details = error.details || {};
  }
}

function headers(extra) {
  const out = { "content-type": "application/json", ...extra };
  const token = sessionStorage.getItem(KEY);
  if (token) out.authorization = `Bearer ${token}`;
  return out;
}

const base = new URL("../v1/", window.location.href);

export async function call(method, path, body) {
  const response = await fetch(new URL(path, base), {
    method,
    headers: headers(),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// A run streamed as server-sent events: onEvent(kind, data) per frame; resolves with the record.
export async function streamRun(groupId, body, onEvent) {
  const response = await fetch(new URL(`groups/${encodeURIComponent(groupId)}/runs`, base), {
    method: "POST",
    headers: headers({ accept: "text/event-stream" }),
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let result = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      const lines = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line.startsWith("data: ")) lines.push(line.slice(6));
      }
      if (!lines.length) continue;
      const data = JSON.parse(lines.join("\n"));
      if (kind === "result") result = data;
      else if (kind === "error") throw new ApiError(500, data);
      else onEvent(kind, data);
    }
  }
  return result;
}

