// Talking to the dsms HTTP API: JSON requests with the bearer token, and streams read with fetch().
//
// The token is asked once (when the server first answers 401), kept in sessionStorage for this tab and sent
// as an Authorization header, never in a URL. Server-sent events are read with fetch() streaming rather than
// EventSource, because EventSource cannot send headers.

const TOKEN_KEY = "dsms.token";
let asking = null;

export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.detail || body.error)) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

function headers(extra = {}) {
  const h = { ...extra };
  const t = sessionStorage.getItem(TOKEN_KEY);
  if (t) h["Authorization"] = `Bearer ${t}`;
  return h;
}

function askToken() {
  if (asking) return asking;
  const dlg = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  asking = new Promise((resolve) => {
    let given = false;
    document.getElementById("token-form").onsubmit = (ev) => {
      ev.preventDefault();
      given = input.value !== "";
      dlg.close();
    };
    document.getElementById("token-cancel").onclick = () => dlg.close();
    // Closed by the form, the Cancel button or Escape alike.
    dlg.addEventListener("close", () => {
      if (given) sessionStorage.setItem(TOKEN_KEY, input.value);
      input.value = "";
      asking = null;
      resolve(given);
    }, { once: true });
    dlg.showModal();
    input.focus();
  });
  return asking;
}

export async function request(method, path, body, contentType = "application/json") {
  for (let attempt = 0; attempt < 2; attempt++) {
    const init = { method, headers: headers() };
    if (body !== undefined) {
      init.headers["Content-Type"] = contentType;
      init.body = contentType === "application/json" ? JSON.stringify(body) : body;
    }
    const r = await fetch(path, init);
    if (r.status === 401 && attempt === 0) {
      if (await askToken()) continue;
    }
    const text = await r.text();
    let doc = null;
    try { doc = text ? JSON.parse(text) : null; } catch { doc = { detail: text }; }
    if (!r.ok) throw new ApiError(r.status, doc);
    return doc;
  }
  throw new ApiError(401, { error: "unauthorized", detail: "no token given" });
}

export const get = (path) => request("GET", path);
export const patch = (path, body) => request("PATCH", path, body);
export const post = (path, body, ctype) => request("POST", path, body, ctype);

async function* lines(path, signal, accept) {
  const r = await fetch(path, { headers: headers({ Accept: accept }), signal });
  if (!r.ok) {
    let doc = null;
    try { doc = await r.json(); } catch { /* not JSON */ }
    throw new ApiError(r.status, doc);
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      yield buf.slice(0, i);
      buf = buf.slice(i + 1);
    }
  }
  if (buf) yield buf;
}

// Server-sent events: calls onEvent(name, data) for each event until the signal aborts or the stream ends.
export async function events(path, signal, onEvent) {
  let name = "message";
  let data = [];
  for await (const line of lines(path, signal, "text/event-stream")) {
    if (line === "") {
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
      name = "message";
      data = [];
    } else if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
}

// NDJSON results of a query: calls onItem(item) per line.
export async function ndjson(path, signal, onItem) {
  for await (const line of lines(path, signal, "application/x-ndjson")) {
    if (line.trim()) onItem(JSON.parse(line));
  }
}

// Runs a streaming reader and keeps quiet about the abort that ends it when the page changes.
export function quietly(promise, onError) {
  promise.catch((e) => { if (e.name !== "AbortError" && onError) onError(e); });
}
