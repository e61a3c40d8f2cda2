// Talking to the ctxstore API: the bearer key, JSON requests, and the SSE stream.
//
// The key comes once from the URL fragment (#key=...) or the key field and
// lives in sessionStorage for this tab only; the fragment is wiped so the key
// does not stay in the address bar or the history.  With no key, requests
// carry no Authorization header at all.

const KEY = "ctxstore.key";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function hashParams() {
  return new URLSearchParams(location.hash.replace(/^#/, ""));
}

export function takeKeyFromFragment() {
  const params = hashParams();
  if (!params.has("key")) return;
  setKey(params.get("key"));
  params.delete("key");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
}

export function getKey() {
  return sessionStorage.getItem(KEY) || "";
}

export function setKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

function headers(extra) {
  const out = { Accept: "application/json", ...extra };
  const key = getKey();
  if (key) out.Authorization = `Bearer ${key}`;
  return out;
}

async function failure(response) {
  let code = `http_${response.status}`;
  let message = response.statusText || "request failed";
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch (_) {
    /* not JSON: keep the status line */
  }
  return new ApiError(response.status, code, message);
}

export async function get(path) {
  const response = await fetch(path, { headers: headers() });
  if (!response.ok) throw await failure(response);
  return response.json();
}

export async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body || {}),
  });
  if (!response.ok) throw await failure(response);
  return response.json();
}

// Server-sent events over fetch (EventSource cannot send an Authorization
// header).  Calls onEvent(name, data) per frame and onState("live" | "retrying"
// | "stopped", detail); reconnects with a growing pause until stopped.
export function stream(path, onEvent, onState) {
  const control = new AbortController();
  let pause = 500;

  async function once() {
    const response = await fetch(path, {
      headers: headers({ Accept: "text/event-stream" }),
      signal: control.signal,
    });
    if (!response.ok) throw await failure(response);
    onState("live");
    pause = 500;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let name = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onEvent(name, JSON.parse(data.join("\n")));
      }
    }
  }

  (async () => {
    while (!control.signal.aborted) {
      try {
        await once();
      } catch (error) {
        if (control.signal.aborted) break;
        onState("retrying", error);
        if (error instanceof ApiError && error.status >= 400 && error.status < 500) {
          onState("stopped", error); // a 401 or 404 will not heal by retrying
          return;
        }
      }
      if (control.signal.aborted) break;
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, 10_000);
    }
  })();
  return () => control.abort();
}
