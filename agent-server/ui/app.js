// The web page of `agent serve`. It uses only the HTTP API under v1/ (and its
// Server-Sent Events stream), with the token kept in sessionStorage, so what the
// page can do, a script with the token can do. Text from the API is only ever
// set as text, never parsed as HTML.
"use strict";

(() => {
  const TOKEN_KEY = "agent-token";
  /** The public statuses, in list order, each with whether it ends a run,
   * as the server declares them (ui/statuses.json). */
  let statuses = [];
  const statusesLoaded = fetch("ui/statuses.json")
    .then((response) => {
      if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
      return response.json();
    })
    .then((list) => {
      statuses = list;
    })
    .catch((err) => toast(`Cannot read the list of statuses from the server (${err.message}); reload the page.`));
  const LIST_POLL_MS = 2000;
  const LONG_TEXT = 240;

  const main = document.getElementById("main");
  const toastBox = document.getElementById("toast");
  const logoutButton = document.getElementById("logout");
  const navSessions = document.getElementById("nav-sessions");

  // ---- small helpers -------------------------------------------------------

  /** An element with attributes (`on*` become listeners) and children. */
  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "class") node.className = value;
      else if (value === true) node.setAttribute(key, "");
      else node.setAttribute(key, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function hasEnded(status) {
    return statuses.some((known) => known.name === status && known.ended);
  }

  function statusLabel(status) {
    return status === "awaiting_approval" ? "awaiting approval" : status;
  }

  function badge(status) {
    return h("span", { class: `badge ${status}`, "data-status": status }, statusLabel(status));
  }

  function localTime(value, withDate) {
    const date = new Date(value);
    if (Number.isNaN(date.getTime())) return String(value);
    return withDate ? date.toLocaleString() : date.toLocaleTimeString();
  }

  function json(value) {
    return JSON.stringify(value, null, 2);
  }

  /** Text shown whole when short, collapsed behind its first line when long. */
  function longText(text, className) {
    const value = String(text);
    if (value.length <= LONG_TEXT && !value.includes("\n")) {
      return h("pre", { class: className }, value);
    }
    const first = value.split("\n")[0];
    const summary = first.length > 100 ? `${first.slice(0, 100)}…` : first;
    return h("details", {}, h("summary", {}, `${summary} (${value.length} characters)`), h("pre", { class: className }, value));
  }

  let toastTimer = 0;
  function toast(message) {
    toastBox.textContent = message;
    toastBox.classList.add("shown");
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => toastBox.classList.remove("shown"), 4000);
  }

  // ---- the API -------------------------------------------------------------

  const base = new URL(".", document.baseURI);

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  function headers(extra) {
    return { Authorization: `Bearer ${token()}`, ...extra };
  }

  /** A JSON request; a 401 forgets the token and shows the login form. */
  async function api(path, options = {}) {
    const init = { method: options.method || "GET", headers: headers({ Accept: "application/json" }) };
    if (options.body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(options.body);
    }
    let response;
    try {
      response = await fetch(new URL(path, base), init);
    } catch (err) {
      throw new ApiError(0, "network", `the server cannot be reached (${err.message})`);
    }
    const text = await response.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    if (response.status === 401 && !options.keepTokenOn401) {
      logout("The server no longer accepts this token. Log in again.");
      throw new ApiError(401, "unauthorized", "unauthorized");
    }
    if (!response.ok) {
      const error = body && body.error ? body.error : {};
      throw new ApiError(response.status, error.code || "http", error.message || `HTTP ${response.status}`);
    }
    return body;
  }

  // ---- routing -------------------------------------------------------------

  let view = null;

  function stopView() {
    if (view && view.stop) view.stop();
    view = null;
  }

  function route() {
    stopView();
    main.replaceChildren();
    if (!token()) {
      logoutButton.hidden = true;
      navSessions.hidden = true;
      view = loginView();
      return;
    }
    logoutButton.hidden = false;
    navSessions.hidden = false;
    const match = location.hash.match(/^#\/sessions\/([^/?#]+)/);
    view = match ? sessionView(decodeURIComponent(match[1])) : listView();
  }

  function logout(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    loginMessage = message || "";
    route();
  }

  let loginMessage = "";

  // ---- login ---------------------------------------------------------------

  function loginView() {
    const input = h("input", {
      id: "token",
      name: "token",
      type: "password",
      autocomplete: "current-password",
      required: true,
      spellcheck: "false",
      "aria-describedby": "token-help login-error",
    });
    const error = h("p", { id: "login-error", class: "alert", role: "alert" }, loginMessage);
    loginMessage = "";
    const submit = h("button", { type: "submit", class: "primary" }, "Log in");
    const form = h(
      "form",
      {
        class: "login",
        "aria-labelledby": "login-title",
        onsubmit: async (event) => {
          event.preventDefault();
          const candidate = input.value.trim();
          if (!candidate) {
            error.textContent = "Paste the token `agent serve` printed (or one of AGENT_API_TOKENS).";
            return;
          }
          submit.disabled = true;
          error.textContent = "";
          sessionStorage.setItem(TOKEN_KEY, candidate);
          try {
            await api("v1/sessions?limit=1", { keepTokenOn401: true });
            route();
          } catch (err) {
            sessionStorage.removeItem(TOKEN_KEY);
            error.textContent =
              err.status === 401 ? "This server does not accept that token. Check it and try again." : `Cannot log in: ${err.message}`;
            submit.disabled = false;
            input.focus();
          }
        },
      },
      h("h1", { id: "login-title" }, "Log in"),
      h("p", { id: "token-help" }, "Paste the API token that agent serve printed, or one of AGENT_API_TOKENS. It stays in this tab only."),
      h("label", { for: "token" }, "API token"),
      input,
      error,
      submit,
    );
    main.append(form);
    input.focus();
    return { stop() {} };
  }

  logoutButton.addEventListener("click", () => logout(""));

  // ---- the session list ----------------------------------------------------

  function listView() {
    let stopped = false;
    let timer = 0;
    const params = new URLSearchParams(location.hash.split("?")[1] || "");
    const statusSelect = h(
      "select",
      { id: "status-filter", onchange: () => { remember(); refresh(); } },
      h("option", { value: "" }, "All"),
    );
    const search = h("input", {
      id: "search",
      type: "search",
      placeholder: "words of the task",
      value: params.get("q") || "",
      oninput: () => { remember(); render(); },
    });
    const problem = h("p", { class: "alert", role: "alert" });
    const count = h("p", { class: "muted", "aria-live": "polite" });
    const tbody = h("tbody");
    const rows = new Map();
    let sessions = [];

    main.append(
      h("h1", {}, "Sessions"),
      h(
        "div",
        { class: "filters" },
        h("div", {}, h("label", { for: "status-filter" }, "Status"), statusSelect),
        h("div", {}, h("label", { for: "search" }, "Search tasks"), search),
      ),
      problem,
      h(
        "table",
        { class: "sessions" },
        h("caption", { class: "skip" }, "Sessions, newest first"),
        h("colgroup", {}, h("col", { class: "status" }), h("col"), h("col", { class: "time" }), h("col", { class: "time" }), h("col", { class: "id" })),
        h(
          "thead",
          {},
          h("tr", {}, h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Task"), h("th", { scope: "col", class: "time" }, "Created"), h("th", { scope: "col", class: "time" }, "Updated"), h("th", { scope: "col", class: "id" }, "Id")),
        ),
        tbody,
      ),
      count,
    );

    function remember() {
      const query = new URLSearchParams();
      if (statusSelect.value) query.set("status", statusSelect.value);
      if (search.value) query.set("q", search.value);
      const text = query.toString();
      history.replaceState(null, "", text ? `#/?${text}` : "#/");
    }

    function rowOf(session) {
      let row = rows.get(session.session_id);
      if (!row) {
        row = h("tr", { "data-session": session.session_id });
        rows.set(session.session_id, row);
      }
      const key = `${session.status}|${session.updated_at}|${session.task}`;
      if (row.dataset.key !== key) {
        row.dataset.key = key;
        row.replaceChildren(
          h("td", {}, badge(session.status)),
          h("td", {}, h("a", { href: `#/sessions/${encodeURIComponent(session.session_id)}` }, session.task)),
          h("td", { class: "time", title: session.created_at }, localTime(session.created_at, true)),
          h("td", { class: "time", title: session.updated_at }, localTime(session.updated_at, true)),
          h("td", { class: "id mono" }, session.session_id.slice(0, 13)),
        );
      }
      return row;
    }

    function render() {
      const words = search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
      const shown = sessions.filter((session) => {
        const text = `${session.task} ${session.session_id}`.toLowerCase();
        return words.every((word) => text.includes(word));
      });
      const keep = new Set(shown.map((session) => session.session_id));
      for (const [id, row] of rows) {
        if (!keep.has(id)) {
          row.remove();
          rows.delete(id);
        }
      }
      shown.forEach((session, index) => {
        const row = rowOf(session);
        if (tbody.children[index] !== row) tbody.insertBefore(row, tbody.children[index] || null);
      });
      count.textContent =
        sessions.length === 0
          ? "No sessions yet. Start one with agent submit, or POST /v1/sessions."
          : `${shown.length} of ${sessions.length} session(s) shown.`;
    }

    async function refresh() {
      clearTimeout(timer);
      const query = new URLSearchParams({ limit: "500" });
      if (statusSelect.value) query.set("status", statusSelect.value);
      try {
        const page = await api(`v1/sessions?${query}`);
        if (stopped) return;
        sessions = page.sessions;
        problem.textContent = "";
        render();
      } catch (err) {
        if (stopped || err.status === 401) return;
        problem.textContent = `The list cannot be refreshed: ${err.message}. Retrying.`;
      }
      if (!stopped) timer = setTimeout(refresh, LIST_POLL_MS);
    }

    statusesLoaded.then(() => {
      if (stopped) return;
      statusSelect.append(...statuses.map((status) => h("option", { value: status.name }, statusLabel(status.name))));
      statusSelect.value = statuses.some((status) => status.name === params.get("status")) ? params.get("status") : "";
      refresh();
    });
    return {
      stop() {
        stopped = true;
        clearTimeout(timer);
      },
    };
  }

  // ---- reading a Server-Sent Events stream ----------------------------------

  /**
   * Follows `path` as an event stream (fetch, so the token goes in a header),
   * calling `onEvent({id, event, data})` per message and `onState(text)` as the
   * connection changes; after a network blip it reconnects with `Last-Event-ID`
   * set to the last id seen. Ends when the server ends the stream and
   * `shouldReconnect()` says no, or when stopped.
   */
  function followStream(path, { lastId, onEvent, onState, shouldReconnect }) {
    let controller = null;
    let stopped = false;
    let delay = 500;

    async function connect() {
      while (!stopped) {
        controller = new AbortController();
        const extra = { Accept: "text/event-stream" };
        if (lastId > 0) extra["Last-Event-ID"] = String(lastId);
        let endedCleanly = false;
        try {
          const response = await fetch(new URL(path, base), { headers: headers(extra), signal: controller.signal, cache: "no-store" });
          if (response.status === 401) {
            logout("The server no longer accepts this token. Log in again.");
            return;
          }
          if (!response.ok || !response.body) {
            const text = await response.text();
            let message = `HTTP ${response.status}`;
            try {
              message = JSON.parse(text).error.message;
            } catch {
              /* keep the status line */
            }
            onState("error", message);
            if (response.status === 404) return;
          } else {
            onState("live");
            delay = 500;
            await readMessages(response.body, (message) => {
              if (message.id) lastId = Number(message.id);
              onEvent(message);
            });
            endedCleanly = true;
          }
        } catch (err) {
          if (stopped) return;
          onState("reconnecting", err.message);
        }
        if (stopped) return;
        if (endedCleanly && !shouldReconnect()) {
          onState("ended");
          return;
        }
        onState("reconnecting");
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 8000);
      }
    }

    connect();
    return {
      stop() {
        stopped = true;
        if (controller) controller.abort();
      },
    };
  }

  /** Splits a stream into SSE messages (blank-line separated `field: value` lines). */
  async function readMessages(body, onMessage) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let message = { id: "", event: "message", data: [] };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let newline;
      while ((newline = buffer.search(/\r\n|\n|\r/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(buffer[newline] === "\r" && buffer[newline + 1] === "\n" ? newline + 2 : newline + 1);
        if (line === "") {
          if (message.data.length > 0) onMessage({ id: message.id, event: message.event, data: message.data.join("\n") });
          message = { id: "", event: "message", data: [] };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "id") message.id = value;
        else if (field === "event") message.event = value;
        else if (field === "data") message.data.push(value);
      }
    }
  }

  // ---- one session ---------------------------------------------------------

  function sessionView(id) {
    let stopped = false;
    let stream = null;
    let refreshTimer = 0;
    let current = null;
    let lastStatus = "queued";
    let lastEnded = false;
    let step = 0;
    let lastKind = "";
    const seen = new Set();

    const title = h("h1", {}, "Session");
    const statusBox = h("span", { "aria-live": "polite" });
    const liveBox = h("span", { class: "live", "aria-live": "polite" }, "connecting…");
    const problem = h("p", { class: "alert", role: "alert" });
    const facts = h("dl", { class: "facts" });
    const actions = h("div", { class: "actions" });
    const notice = h("div");
    const result = h("div");
    const pendingBox = h("section", { "aria-label": "Calls waiting for a decision" });
    const timeline = h(
      "ol",
      { class: "timeline", "aria-label": "Events" },
      h("li", { class: "head", "aria-hidden": "true" }, h("span", {}, "seq"), h("span", {}, "time"), h("span", {}, "step"), h("span", {}, "event"), h("span", {}, "detail"), h("span", {}, "")),
    );

    const writingText = h("pre", { class: "writing-text" });
    const writingLabel = h("div", { class: "writing-label" });
    const writing = h("section", { class: "writing", "aria-label": "The response being written", "aria-live": "polite", hidden: true }, writingLabel, writingText);

    main.append(
      h("p", {}, h("a", { href: "#/" }, "← All sessions")),
      h("div", { class: "session-head" }, title, statusBox, liveBox),
      problem,
      notice,
      facts,
      actions,
      result,
      pendingBox,
      h("h2", {}, "Timeline"),
      timeline,
      writing,
    );

    /** A `delta` message: the text of a step's response while it is written. */
    function addDelta(delta) {
      const stepText = String(delta.step);
      if (writing.hidden || writing.dataset.step !== stepText || delta.restart) {
        writing.dataset.step = stepText;
        writingLabel.textContent = `step ${delta.step} · being written${delta.restart ? " (started over)" : ""}`;
        writingText.textContent = "";
        writing.hidden = false;
      }
      writingText.textContent += delta.text;
    }

    const forkedFrom = sessionStorage.getItem(`forked:${id}`);
    if (forkedFrom) {
      const [parent, at] = JSON.parse(forkedFrom);
      notice.replaceChildren(
        h("div", { class: "notice", role: "status" }, "This session is a fork of ", sessionLink(parent), ` at event ${at}. Continue it to run from there.`),
      );
    }

    function sessionLink(other) {
      return h("a", { href: `#/sessions/${encodeURIComponent(other)}`, class: "mono" }, other);
    }

    function fact(label, value) {
      return h("div", {}, h("dt", {}, label), h("dd", {}, value));
    }

    function renderHead(session) {
      title.textContent = session.task;
      statusBox.replaceChildren(badge(session.status));
      const usage = session.usage || {};
      facts.replaceChildren(
        fact("Session", h("span", { class: "mono" }, session.session_id)),
        fact("Agent", session.agent || "—"),
        fact("Model", session.model || "—"),
        fact("Strategy", session.strategy),
        fact("Created", localTime(session.created_at, true)),
        fact("Updated", localTime(session.updated_at, true)),
        fact("Steps", String(session.steps_used)),
        fact("Tokens (in / out)", `${usage.input_tokens || 0} / ${usage.output_tokens || 0}`),
        fact("Calls (model / tool)", `${usage.model_calls || 0} / ${usage.tool_calls || 0}`),
      );
      if (session.instructions) facts.append(fact("Instructions", longText(session.instructions)));
      renderActions(session);
      renderResult(session);
      renderPending(session);
    }

    function renderActions(session) {
      const buttons = [];
      if (!hasEnded(session.status)) {
        buttons.push(h("button", { type: "button", class: "danger", id: "cancel", onclick: cancel }, "Cancel session"));
      }
      if (lastKind === "forked" && !hasEnded(session.status)) {
        buttons.push(h("button", { type: "button", class: "primary", id: "continue", onclick: resume }, "Continue from the fork"));
      }
      actions.replaceChildren(...buttons);
    }

    function renderResult(session) {
      const run = session.result;
      if (!run || !hasEnded(session.status)) {
        result.replaceChildren();
        return;
      }
      result.replaceChildren(
        h(
          "section",
          { class: `result ${session.status}`, "aria-label": "Result" },
          h("h2", {}, session.status === "finished" ? "Answer" : "Ended"),
          run.partial ? h("div", { class: "muted" }, "partial answer: written after a limit ended the run") : null,
          run.degraded ? h("div", { class: "muted" }, "degraded answer: plain text after repeated invalid output") : null,
          run.answer ? longText(run.answer) : null,
          h("div", { class: "muted" }, `exit reason ${run.exit_reason}`, run.budget ? ` (${run.budget})` : ""),
          run.error ? h("div", { class: "error-text" }, run.error) : null,
        ),
      );
    }

    function renderPending(session) {
      const pending = session.status === "awaiting_approval" ? session.pending : [];
      const existing = new Map([...pendingBox.querySelectorAll("[data-call]")].map((node) => [node.dataset.call, node]));
      if (pending.length === 0) {
        pendingBox.replaceChildren();
        return;
      }
      const cards = pending.map((call) => existing.get(call.id) || pendingCard(session, call));
      pendingBox.replaceChildren(h("h2", {}, `Waiting for a decision (${pending.length})`), ...cards);
    }

    function pendingCard(session, call) {
      const message = h("div", { class: "alert", role: "alert" });
      const formBox = h("div");
      const card = h(
        "article",
        { class: "pending", "data-call": call.id, "aria-label": `Call ${call.tool_name}` },
        h("h3", {}, h("span", { class: "node" }, call.tool_name), h("span", { class: "muted mono" }, ` ${call.id}`)),
        h("pre", {}, json(call.arguments)),
        h(
          "div",
          { class: "actions" },
          h("button", { type: "button", class: "primary", onclick: () => decide(call, "approve", {}, message) }, "Approve"),
          h("button", { type: "button", onclick: () => showEdit() }, "Edit"),
          h("button", { type: "button", class: "danger", onclick: () => showDeny() }, "Deny"),
        ),
        message,
        formBox,
      );

      function showDeny() {
        const fieldId = `reason-${call.id}`;
        const reason = h("textarea", { id: fieldId, rows: 2, "aria-required": "true" });
        formBox.replaceChildren(
          h(
            "form",
            {
              onsubmit: (event) => {
                event.preventDefault();
                if (!reason.value.trim()) {
                  message.textContent = "Say why the call is denied; the model receives the reason.";
                  reason.focus();
                  return;
                }
                decide(call, "deny", { reason: reason.value.trim() }, message);
              },
            },
            h("label", { for: fieldId }, "Reason (the model receives it)"),
            reason,
            h("div", { class: "actions" }, h("button", { type: "submit", class: "danger" }, "Deny call")),
          ),
        );
        reason.focus();
      }

      function showEdit() {
        const fieldId = `arguments-${call.id}`;
        const editor = h("textarea", { id: fieldId, rows: 8, spellcheck: "false", "aria-describedby": `${fieldId}-check` });
        editor.value = json(call.arguments);
        const verdict = h("div", { id: `${fieldId}-check`, class: "hint", "aria-live": "polite" });
        const send = h("button", { type: "submit", class: "primary" }, "Approve with these arguments");
        const parse = () => {
          try {
            const value = JSON.parse(editor.value);
            verdict.className = "hint";
            verdict.textContent = "Valid JSON; the server checks it against the tool's input schema.";
            send.disabled = false;
            return { value };
          } catch (err) {
            verdict.className = "alert";
            verdict.textContent = `Not JSON: ${err.message}`;
            send.disabled = true;
            return null;
          }
        };
        editor.addEventListener("input", () => {
          message.textContent = "";
          parse();
        });
        formBox.replaceChildren(
          h(
            "form",
            {
              onsubmit: (event) => {
                event.preventDefault();
                const parsed = parse();
                if (parsed !== null) decide(call, "approve", { arguments: parsed.value }, message);
              },
            },
            h("label", { for: fieldId }, "Arguments (JSON)"),
            editor,
            verdict,
            h("div", { class: "actions" }, send),
          ),
        );
        parse();
        editor.focus();
      }

      return card;
    }

    async function decide(call, verb, body, message) {
      message.textContent = "";
      const buttons = [...pendingBox.querySelectorAll(`[data-call="${CSS.escape(call.id)}"] button`)];
      buttons.forEach((button) => { button.disabled = true; });
      try {
        await api(`v1/sessions/${encodeURIComponent(id)}/${verb}`, { method: "POST", body: { call: call.id, ...body } });
        toast(verb === "approve" ? `Approved ${call.tool_name}.` : `Denied ${call.tool_name}.`);
        scheduleRefresh(0);
      } catch (err) {
        message.textContent = err.status === 422 ? `The server refused the arguments: ${err.message}` : err.message;
        buttons.forEach((button) => { button.disabled = false; });
      }
    }

    async function cancel() {
      if (!window.confirm("Cancel this session? Nothing runs after a cancel.")) return;
      try {
        await api(`v1/sessions/${encodeURIComponent(id)}/cancel`, { method: "POST" });
        toast("Cancelled.");
        scheduleRefresh(0);
      } catch (err) {
        problem.textContent = `Cannot cancel: ${err.message}`;
      }
    }

    async function resume() {
      try {
        const answer = await api(`v1/sessions/${encodeURIComponent(id)}/resume`, { method: "POST" });
        toast(answer.status === "queued" ? "Queued for a worker." : `Nothing to continue: ${statusLabel(answer.status)}.`);
        sessionStorage.removeItem(`forked:${id}`);
        notice.replaceChildren();
        scheduleRefresh(0);
        if (stream === null || liveBox.dataset.state === "ended") startStream();
      } catch (err) {
        problem.textContent = `Cannot continue: ${err.message}`;
      }
    }

    async function fork(seq, button) {
      button.disabled = true;
      try {
        const forked = await api(`v1/sessions/${encodeURIComponent(id)}/fork`, { method: "POST", body: { at: seq } });
        sessionStorage.setItem(`forked:${forked.session_id}`, JSON.stringify([forked.parent, forked.at]));
        toast(`Forked at event ${forked.at}.`);
        location.hash = `#/sessions/${encodeURIComponent(forked.session_id)}`;
      } catch (err) {
        problem.textContent = `Cannot fork: ${err.message}`;
        button.disabled = false;
      }
    }

    function addEvent(event) {
      if (seen.has(event.seq)) return;
      seen.add(event.seq);
      const kind = event.kind;
      if (kind.type === "model_responded" || kind.type === "last_answer") writing.hidden = true;
      if (kind.type === "model_requested") step = kind.step;
      lastKind = kind.type;
      const before = lastStatus;
      lastStatus = event.status;
      lastEnded = event.ended;
      const transition = lastStatus !== before || kind.type === "session_started" ? h("div", { class: "transition" }, `→ ${statusLabel(lastStatus)}`) : null;
      const forkButton = h("button", { type: "button", class: "small", "aria-label": `Fork at event ${event.seq}`, onclick: (e) => fork(event.seq, e.currentTarget) }, "Fork");
      timeline.append(
        h(
          "li",
          { class: event.problem ? "error" : "", "data-seq": event.seq, "data-kind": kind.type, "data-step": step || null },
          h("span", { class: "seq" }, event.seq),
          h("span", { class: "time", title: new Date(event.at).toISOString() }, localTime(event.at, false)),
          h("span", { class: "step" }, step ? step : ""),
          h("span", { class: "kind" }, kind.type === "strategy" ? `strategy · ${kind.name}` : kind.type, transition),
          h("div", { class: "detail" }, longText(event.description, event.problem ? "error-text" : "")),
          h("span", { class: "fork" }, forkButton),
        ),
      );
    }

    async function refresh() {
      try {
        const session = await api(`v1/sessions/${encodeURIComponent(id)}`);
        await statusesLoaded;
        if (stopped) return;
        current = session;
        problem.textContent = "";
        renderHead(session);
      } catch (err) {
        if (stopped || err.status === 401) return;
        problem.textContent = err.status === 404 ? `No session has the id ${id}.` : `Cannot read the session: ${err.message}`;
      }
    }

    function scheduleRefresh(ms) {
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(refresh, ms);
    }

    function startStream() {
      if (stream) stream.stop();
      stream = followStream(`v1/sessions/${encodeURIComponent(id)}/events`, {
        lastId: Math.max(0, ...seen),
        onEvent: (message) => {
          if (message.event === "error") {
            try {
              problem.textContent = `The stream stopped: ${JSON.parse(message.data).error.message}`;
            } catch {
              problem.textContent = "The stream stopped.";
            }
            return;
          }
          if (message.event === "delta") {
            try {
              addDelta(JSON.parse(message.data));
            } catch (err) {
              problem.textContent = `A delta could not be read: ${err.message}`;
            }
            return;
          }
          try {
            addEvent(JSON.parse(message.data));
          } catch (err) {
            problem.textContent = `An event could not be read: ${err.message}`;
          }
          scheduleRefresh(150);
        },
        onState: (state, detail) => {
          liveBox.dataset.state = state;
          liveBox.className = `live ${state === "live" ? "on" : state === "reconnecting" ? "off" : ""}`;
          liveBox.textContent = { live: "live", reconnecting: "reconnecting…", ended: "ended", error: "stream error" }[state];
          if (state === "error" && detail) problem.textContent = detail;
          if (state === "ended" || state === "live") scheduleRefresh(0);
        },
        shouldReconnect: () => !(current && hasEnded(current.status)) && !lastEnded,
      });
    }

    refresh();
    startStream();
    main.focus();
    return {
      stop() {
        stopped = true;
        clearTimeout(refreshTimer);
        if (stream) stream.stop();
      },
    };
  }

  window.addEventListener("hashchange", route);
  route();
})();
